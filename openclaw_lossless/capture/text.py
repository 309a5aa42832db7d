"""Derive the searchable text of an AgentMessage.

The original object is stored verbatim; this text is what gets indexed, embedded and recalled. Rules:
text blocks as they are; tool calls as ``[tool call name] {arguments}``; tool results prefixed with the tool
name and truncated for the index (never in storage); images as a placeholder; thinking blocks left out
unless asked for (they are the model's scratch work, rarely worth recalling, often large). Text the host or
a plugin injected (``injected.py``) is left out of each text block before any truncation.

``descriptor_text`` is the simpler text the JS shim computes for window keys; it must stay in step with
``plugin/index.js`` and the ``descriptor`` section of ``plugin-manifest.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from openclaw_lossless.capture.token_estimate import token_units, tokens_of_units

INDEX_TOOL_RESULT_CHARS = 2000
INDEX_TEXT_CHARS = 20000
Clean = Callable[[str], str]


def _as_is(text: str) -> str:
    return text


def searchable_text(message: dict[str, Any], *, include_thinking: bool = False, clean: Clean = _as_is) -> str:
    """The text a person would search this message by; ``clean`` takes injected text out of each text."""
    role = message.get("role")
    if role == "toolResult":
        body = _truncate(_content_text(message.get("content"), include_thinking, clean), INDEX_TOOL_RESULT_CHARS)
        name = message.get("toolName") or "tool"
        return f"[tool result {name}] {body}".strip()
    if role == "bashExecution":
        output = _truncate(str(message.get("output") or ""), INDEX_TOOL_RESULT_CHARS)
        return f"$ {message.get('command') or ''}\n{output}".strip()
    if role in ("compactionSummary", "branchSummary"):
        return _truncate(str(message.get("summary") or ""), INDEX_TEXT_CHARS)
    return _truncate(_content_text(message.get("content"), include_thinking, clean), INDEX_TEXT_CHARS)


def _content_text(content: Any, include_thinking: bool, clean: Clean) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return clean(content)
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return str(content)
    parts = [_block_text(block, include_thinking, clean) for block in content]
    return "\n".join(part for part in parts if part)


def _block_text(block: Any, include_thinking: bool, clean: Clean) -> str:
    if isinstance(block, str):
        return clean(block)
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return clean(str(block.get("text") or ""))
    if kind == "thinking":
        return str(block.get("thinking") or "") if include_thinking else ""
    if kind == "image":
        return f"[image {block.get('mimeType') or ''}]".replace(" ]", "]")
    if kind == "toolCall":
        arguments = json.dumps(block.get("arguments"), ensure_ascii=False, sort_keys=True)
        return f"[tool call {block.get('name') or 'tool'}] {_truncate(arguments, INDEX_TOOL_RESULT_CHARS)}"
    return clean(str(block.get("text") or ""))


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit] + " …[truncated]"


def descriptor_text(message: dict[str, Any]) -> str:
    """The shim's text of a message: the string content, or its text blocks joined by newlines."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [str(b.get("text") or "") for b in content if isinstance(b, dict) and b.get("type") == "text"]
    return "\n".join(texts)


def descriptor_tokens(message: dict[str, Any]) -> int:
    """Token estimate as the shim computes it: the per-script estimate (``token_estimate.py``) of the text,
    the tool-call arguments' JSON and a summary, summed before rounding up, plus 4."""
    units = token_units(descriptor_text(message))
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "toolCall":
                units += token_units(json.dumps(block.get("arguments"), separators=(",", ":"), ensure_ascii=False))
    if message.get("role") in ("compactionSummary", "branchSummary"):
        units += token_units(str(message.get("summary") or ""))
    return tokens_of_units(units) + 4


def window_key(message: dict[str, Any]) -> str:
    """sha256 of role, timestamp and descriptor text: how a host message is matched to a stored one."""
    timestamp = message.get("timestamp")
    stamp = ""
    if isinstance(timestamp, int | float) and not isinstance(timestamp, bool) and _finite(timestamp):
        stamp = str(int(timestamp))
    raw = f"{message.get('role') or ''}\n{stamp}\n{descriptor_text(message)}"
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _finite(number: float) -> bool:
    """Whether JavaScript reads the number as finite: an integer too long for a double is Infinity there."""
    try:
        return math.isfinite(number)
    except OverflowError:
        return False
