"""What the store holds, counted: the numbers ``/stats`` reports, whichever backend counted them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StoreCounts:
    """Rows per kind, as ``/stats`` reports them."""

    messages: int
    sessions: int
    agents: int
    turns: int
    snapshots: int
    forgotten: int  # tombstones: messages forgotten on request
    subagents: int  # subagent links
    archived_messages: int  # moved to the JSONL archive to stay under maxDbSizeMb
    archives: int
