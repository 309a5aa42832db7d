"""An agent's memory files as the store keeps them: one session per agent holding the files' chunks."""

from __future__ import annotations

from dataclasses import dataclass

SESSION_PREFIX = "memory-files:"  # + agent id: the session holding an agent's memory-file chunks


KIND = "memory"


@dataclass(frozen=True)
class MemoryFile:
    """One indexed file of an agent's workspace (``path`` relative to the workspace, POSIX)."""

    agent_id: str
    path: str
    workspace: str
    file_hash: bytes
    size: int
    mtime_ns: int
    chunks: int
    indexed_at: float


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as stored: its message id, identity and citation (``file:<path>#L<a>-<b>``)."""

    id: int
    content_hash: bytes
    citation: str


def session_id_of(agent_id: str) -> str:
    return SESSION_PREFIX + agent_id


def session_key_of(agent_id: str) -> str:
    return f"agent:{agent_id}:memory-files"
