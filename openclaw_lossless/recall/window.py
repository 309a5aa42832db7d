"""The recent window: the newest host messages that fit the window's share of the token budget.

The host sends its whole history every turn; the sidecar answers only where the window starts, so the shim
slices its own array. The window holds at least one message and never starts on a tool result (that would
split the result from the assistant message that called the tool).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Descriptor:
    """What the sidecar needs of one host message (see plugin-manifest.json, ``descriptor``)."""

    role: str
    key: str
    tokens: int
    timestamp: float | None = None
    text: str | None = None


def window_start(descriptors: Sequence[Descriptor], budget: int) -> int:
    """Index of the first message of the window (``len(descriptors)`` when there are none)."""
    start, used = len(descriptors), 0
    while start > 0:
        cost = descriptors[start - 1].tokens
        if start < len(descriptors) and used + cost > budget:
            break
        used += cost
        start -= 1
    while 0 < start < len(descriptors) and descriptors[start].role == "toolResult":
        start -= 1
    return start


def query_parts(
    prompt: str | None,
    window: Sequence[Descriptor],
    user_turns: int = 3,
    clean: Callable[[str], str] | None = None,
) -> list[str]:
    """The prompt plus the last few user messages of the window, newest first, each once: what recall seeks.

    Kept apart so that each part is embedded on its own (``EmbeddingService.embed_query``): the window's user
    messages were the prompts of the turns before, so their vectors are already cached and a turn embeds only
    what is new to it. ``clean`` takes out what the host or a plugin injected (``capture/injected.py``): a
    prompt wrapped in channel metadata or another plugin's recall is searched by what the user said.
    """
    users = [d.text for d in window if d.role == "user" and d.text]
    parts: list[str] = []
    for raw in [prompt or "", *users[-user_turns:][::-1]]:
        part = clean(raw) if clean is not None else raw
        if part.strip() and part not in parts:
            parts.append(part)
    return parts


def query_text(prompt: str | None, window: Sequence[Descriptor], user_turns: int = 3) -> str:
    """The query parts as one text: what the keyword lane searches for."""
    return "\n".join(query_parts(prompt, window, user_turns))
