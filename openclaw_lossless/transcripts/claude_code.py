"""Claude Code's session transcripts as the history of an agent of their own (``claude-code``), read-only.

Why: a Claude Code user who runs ``openclaw-lossless mcp`` gets ``memory_search`` over their own past sessions.
Claude Code writes one JSONL file per session under ``~/.claude/projects/<project>/<sessionId>.jsonl`` (a
subagent's under ``<sessionId>/subagents/``), one entry a line: ``type`` user or assistant (``summary``,
``system`` and the like carry no conversation), ``message`` {role, content: a string or blocks ``text``,
``thinking``, ``tool_use``, ``tool_result``}, ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp`` (ISO),
``cwd``. Each line becomes the AgentMessages the store captures (``tool_use`` → a ``toolCall`` block, each
``tool_result`` → a ``toolResult`` message), dated by the line; an assistant reply streamed over several lines
stays several messages. The JSONL reader does the rest: a byte-offset cursor per file, a half-written last
line left until it is complete, identity by content so a line read twice is stored once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openclaw_lossless.transcripts.entries import agent_message
from openclaw_lossless.transcripts.readers import Codec, JsonlReader
from openclaw_lossless.transcripts.reading import Progress, run_readers
from openclaw_lossless.transcripts.sink import Sink
from openclaw_lossless.transcripts.sources import SAFE_SESSION_ID, ReadReport, Source

AGENT = "claude-code"
SOURCE_PREFIX = "claude-code:"  # cursor names: never an OpenClaw source's (those are paths under its state dir)


def discover(projects: Path) -> list[Source]:
    """Every session transcript under Claude Code's projects dir, oldest path order (sorted)."""
    if not projects.is_dir():
        return []
    found: list[Source] = []
    for path in sorted(projects.rglob("*.jsonl")):
        if path.is_file() and SAFE_SESSION_ID.match(path.stem):
            source_id = SOURCE_PREFIX + path.relative_to(projects).as_posix()
            found.append(Source("jsonl", AGENT, path, source_id, path.stem))
    return found


def fingerprint(projects: Path) -> tuple[int, ...] | None:
    """Sizes and mtimes of every transcript: what changes whenever Claude Code writes one."""
    seen: list[int] = []
    for source in discover(projects):
        try:
            stat = source.path.stat()
        except OSError:
            continue
        seen += [stat.st_size, stat.st_mtime_ns]
    return tuple(seen) if seen else None


def read_claude_code(sink: Sink, projects: Path, *, progress: Progress | None = None) -> ReadReport:
    """Import (incrementally) every Claude Code session transcript under ``projects``."""
    codec = Codec.load()
    return run_readers([ClaudeCodeReader(sink, source, codec) for source in discover(projects)], progress)


class ClaudeCodeReader(JsonlReader):
    """A JSONL reader whose lines are Claude Code entries, turned into transcript ``message`` entries."""

    def __init__(self, sink: Sink, source: Source, codec: Codec | None) -> None:
        super().__init__(sink, source, codec, f"agent:{AGENT}:{source.session_id}")

    def plan(self) -> int:
        pending = super().plan()
        self.shrink = None  # Claude Code appends; a rewritten file is read again whole, identity dedups it
        return pending

    def entries(self, entry: dict[str, Any] | None) -> list[dict[str, Any] | None]:
        return list(transcript_entries(entry)) if entry is not None else [None]


def transcript_entries(line: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The transcript entries one Claude Code line stands for (none for a line with nothing to keep)."""
    kind = line.get("type")
    message = line.get("message")
    if kind not in ("user", "assistant") or not isinstance(message, dict):
        yield {"type": f"claudeCode.{kind}" if isinstance(kind, str) else "malformed"}
        return
    if line.get("isMeta") is True:  # a caveat Claude Code adds around local commands, not the user's words
        yield {"type": "claudeCode.meta"}
        return
    base = {"type": "message", "id": line.get("uuid"), "parentId": line.get("parentUuid"),
            "timestamp": line.get("timestamp")}  # fmt: skip
    for message_out in _messages(kind, message.get("content")):
        yield {**base, "message": agent_message({**base, "message": message_out}, None)}


def _messages(kind: str, content: Any) -> Iterator[dict[str, Any]]:
    if isinstance(content, str):
        if content.strip():
            yield {"role": kind, "content": [{"type": "text", "text": content}]}
        return
    blocks = [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []
    kept = [converted for block in blocks if (converted := _block(block)) is not None]
    if kept:
        yield {"role": kind, "content": kept}
    for block in blocks:
        if block.get("type") == "tool_result":
            yield _tool_result(block)


def _block(block: dict[str, Any]) -> dict[str, Any] | None:
    """A content block as the store's AgentMessage has it; None for one kept elsewhere or not at all."""
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return {"type": "text", "text": block["text"]}
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return {"type": "thinking", "thinking": block["thinking"]}
    if kind == "tool_use":
        return {"type": "toolCall", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
    return None  # tool_result (a message of its own), images, redacted thinking


def _tool_result(block: dict[str, Any]) -> dict[str, Any]:
    content = block.get("content")
    if isinstance(content, str):
        parts = [{"type": "text", "text": content}]
    elif isinstance(content, list):
        parts = [
            {"type": "text", "text": part["text"]}
            for part in content
            if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
        ]
    else:
        parts = []
    return {"role": "toolResult", "toolCallId": block.get("tool_use_id"), "content": parts,
            "isError": block.get("is_error") is True}  # fmt: skip
