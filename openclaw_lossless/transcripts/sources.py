"""Where an OpenClaw installation keeps its transcripts, and what reading each one came to."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

SQLITE_NAME = "openclaw-agent.sqlite"
AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
SAFE_SESSION_ID = re.compile(r"^[^\W_][\w.\-]{0,127}$")  # OpenClaw's validateSessionId, near enough
_ARCHIVE = re.compile(
    r"^(?P<session>.+)\.jsonl\.(?:reset|deleted)\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z"
    r"(?:\.[0-9a-f]{32})?(?P<zst>\.zst)?$"
)
_CHECKPOINT = re.compile(r"\.checkpoint\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$", re.I)
SourceKind = Literal["sqlite", "jsonl"]


@dataclass(frozen=True)
class Source:
    """One transcript store: an agent's SQLite database, or one JSONL transcript file of one session."""

    kind: SourceKind
    agent_id: str
    path: Path
    source_id: str  # the path under the state dir: stable across runs, it names the cursor
    session_id: str | None = None  # JSONL only: the session the file holds


@dataclass
class SourceReport:
    source: str
    kind: str
    agent_id: str
    sessions: int = 0
    entries_read: int = 0
    messages_seen: int = 0
    messages_imported: int = 0
    compactions: int = 0
    skipped_malformed: int = 0
    skipped_compressed: int = 0  # zstd rows while no zstd codec is installed; read again once one is
    skipped_types: dict[str, int] = field(default_factory=dict)
    sessions_excluded: int = 0  # left out by LOSSLESS_INCLUDE_SESSIONS / LOSSLESS_EXCLUDE_SESSIONS
    sessions_left: int = 0  # left for an explicit import: catch-up follows only what live capture would see
    error: str | None = None


@dataclass
class ReadReport:
    sources: int = 0
    sessions: int = 0
    messages_seen: int = 0
    messages_imported: int = 0
    compactions: int = 0
    skipped_malformed: int = 0
    skipped_compressed: int = 0
    sessions_excluded: int = 0
    errors: int = 0
    details: list[SourceReport] = field(default_factory=list)


def discover(state_dir: Path) -> list[Source]:
    """Every agent's transcript stores under an OpenClaw state dir: per agent, SQLite first, then files."""
    agents = state_dir / "agents"
    if not agents.is_dir():
        return []
    found: list[Source] = []
    for agent_dir in sorted(agents.iterdir()):
        if agent_dir.is_dir() and AGENT_ID.match(agent_dir.name):
            found += _agent_sources(state_dir, agent_dir)
    return found


def _agent_sources(state_dir: Path, agent_dir: Path) -> list[Source]:
    agent = agent_dir.name
    database = agent_dir / "agent" / SQLITE_NAME
    sources = [Source("sqlite", agent, database, relative_path(state_dir, database))] if database.is_file() else []
    sessions_dir = agent_dir / "sessions"
    if sessions_dir.is_dir():
        for path in sorted(sessions_dir.iterdir()):
            session_id = transcript_session_id(path.name)
            if session_id is not None and path.is_file():
                sources.append(Source("jsonl", agent, path, relative_path(state_dir, path), session_id))
    return sources


def transcript_session_id(name: str) -> str | None:
    """The session a file in ``sessions/`` holds, or None when it is not a transcript we import."""
    archived = _ARCHIVE.match(name)
    if archived:
        stem = archived["session"]
    elif name.endswith(".jsonl") and not name.endswith(".trajectory.jsonl") and not _CHECKPOINT.search(name):
        stem = name.removesuffix(".jsonl")
    else:
        return None
    return stem if is_identifier(stem) else None


def relative_path(state_dir: Path, path: Path) -> str:
    return path.relative_to(state_dir).as_posix()


def is_identifier(value: str) -> bool:
    """The store's rule for session ids (``check_identifier``), as a test instead of an error."""
    return 0 < len(value) <= 512 and all(ord(ch) >= 32 for ch in value)
