"""Transcript rows that are not conversation: the store neither imports them nor counts them as missing.

The host writes some rows to a session's transcript that no model turn produced and that it never replays to
a model:

- assistant rows it marks as its own transcript artifacts: ``provider: "openclaw"`` with ``model``
  ``"gateway-injected"`` (a chat command's answer, an injected note) or ``"delivery-mirror"`` (a copy of a reply
  delivered to a channel), or an ``openclawDeliveryMirror`` marker (OpenClaw's
  ``isTranscriptOnlyOpenClawAssistantMessage``);
- the user's ``/lossless`` chat commands, which the plugin answers without the model.

The ``/lossless search`` answer quotes stored history: storing it would make recall feed on its own output.
Import, catch-up and the gap report (``doctor``) all ask this one predicate, so they agree on what the host
recorded that the store should hold.
"""

from __future__ import annotations

from typing import Any

from openclaw_lossless.capture.text import descriptor_text

COMMAND = "/lossless"
TRANSCRIPT_ONLY_MODELS = frozenset({"gateway-injected", "delivery-mirror"})
DELIVERY_MIRROR_KINDS = frozenset(
    {"channel-final", "channel-final-suppressed", "message-tool-source-reply", "cron-direct-delivery-context"}
)


def transcript_only(message: dict[str, Any]) -> bool:
    """Whether a transcript message is one the store leaves out (see the module's docstring)."""
    role = message.get("role")
    if role == "assistant":
        return _host_artifact(message)
    if role == "user":
        return is_command(descriptor_text(message))
    return False


def is_command(text: str) -> bool:
    """``/lossless`` or ``/lossless <anything>``: the plugin's chat command, answered without the model."""
    text = text.strip()
    return text == COMMAND or (text.startswith(COMMAND) and text[len(COMMAND)].isspace())


def _host_artifact(message: dict[str, Any]) -> bool:
    if message.get("provider") == "openclaw" and message.get("model") in TRANSCRIPT_ONLY_MODELS:
        return True
    mirror = message.get("openclawDeliveryMirror")
    return isinstance(mirror, dict) and mirror.get("kind") in DELIVERY_MIRROR_KINDS
