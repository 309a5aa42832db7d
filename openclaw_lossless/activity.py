"""Per-agent activity: when each agent last committed a turn and last assembled, and its last recall.

Why: the failure users of memory plugins meet most is silence. Memory stops, turns keep working, and nobody
notices for days. ``/healthz`` and ``/stats`` show these times per agent so a monitor can alert on silence, and
the ``/lossless`` chat command shows the last turn's Recalled Context with why each line was kept or dropped.

What it costs the turn: nothing is computed for it. ``assembled`` keeps a reference to what assemble built
anyway (the block, the recalled list, the scored candidates, which hold numbers and ids, no text); the trace
dicts are built only when someone asks for them. Memory is bounded: the last recall of at most
``MAX_RECALLS`` agents (the least recently assembling one is forgotten first), the times of at most
``MAX_AGENTS``. Only redacted text is kept: the block is built from stored text, which is always redacted;
the query (the raw prompt) is not kept at all.

After a restart the last commit time per agent is read back from the store (``from_store``): one short index
lookup per session, never a scan of the turns. The last assemble time and recall are not persisted: until
the first assemble after a start they are null.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from openclaw_lossless.recall.assemble import AssembleResult, Recalled
from openclaw_lossless.recall.scoring import Candidate
from openclaw_lossless.store import agents
from openclaw_lossless.store.connection import Connection

MAX_AGENTS = 10_000
MAX_RECALLS = 64

V = TypeVar("V")


def iso(epoch_s: float | None) -> str | None:
    """ISO-8601 UTC with milliseconds and a ``Z``, or None."""
    if epoch_s is None:
        return None
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class AgentTimes:
    """When an agent last committed a turn and last assembled (ISO-8601 UTC, None: not since the start)."""

    last_commit_at: str | None
    last_assemble_at: str | None


@dataclass(frozen=True)
class RecallSummary:
    """What ``/lossless`` shows of an assemble: when, how many lines (hits and their neighbours), tokens."""

    at: str | None
    session_id: str
    lines: int
    hits: int
    neighbours: int
    estimated_tokens: int
    recall_skipped: str | None


@dataclass(frozen=True)
class RecallDetail(RecallSummary):
    """The block and every candidate's score parts and decision: the assemble trace."""

    block: str
    recalled: list[Recalled]
    window_tokens: int
    lanes: list[str]
    decisions: dict[str, int]
    trace: list[dict[str, Any]]


@dataclass(frozen=True)
class Recall:
    """One assemble's outcome, as built by the assembler (referenced, not copied)."""

    at: float
    session_id: str
    block: str
    recalled: list[Recalled]
    candidates: list[Candidate]
    skipped: str | None
    estimated_tokens: int
    window_tokens: int
    lanes: frozenset[str]

    def decisions(self) -> dict[str, int]:
        """How many candidates ended in each decision (kept, neighbour, over_budget, ...)."""
        return dict(Counter(c.decision for c in self.candidates))

    def summary(self) -> RecallSummary:
        """What ``/lossless`` shows: when, how many lines (hits and their neighbours), how many tokens."""
        neighbours = sum(1 for item in self.recalled if item.neighbour_of)
        lines = len(self.recalled)
        at = iso(self.at)
        return RecallSummary(
            at, self.session_id, lines, lines - neighbours, neighbours, self.estimated_tokens, self.skipped
        )

    def detail(self) -> RecallDetail:
        """The block and every candidate's score parts and decision: the assemble trace, built on demand."""
        trace = [asdict(c) | {"lanes": sorted(c.lanes), "citation": f"msg:{c.message_id}"} for c in self.candidates]
        return RecallDetail(
            **vars(self.summary()),
            block=self.block,
            recalled=self.recalled,
            window_tokens=self.window_tokens,
            lanes=sorted(self.lanes),
            decisions=self.decisions(),
            trace=trace,
        )


class Activity:
    """Thread-safe, in memory: the hooks write it, the operator endpoints read it."""

    def __init__(self, last_commits: dict[str, float] | None = None) -> None:
        self._lock = threading.Lock()
        self._commits: OrderedDict[str, float] = OrderedDict(sorted((last_commits or {}).items(), key=lambda i: i[1]))
        self._assembles: OrderedDict[str, float] = OrderedDict()
        self._recalls: OrderedDict[str, Recall] = OrderedDict()

    @classmethod
    def from_store(cls, conn: Connection) -> Activity:
        """The last commit time of every agent the store knows, read with one indexed query."""
        return cls(agents.last_commits(conn))

    def committed(self, agent_id: str, at: float) -> None:
        with self._lock:
            _touch(self._commits, agent_id, at, MAX_AGENTS)

    def assembled(self, agent_id: str, session_id: str, result: AssembleResult, at: float) -> None:
        recall = Recall(
            at=at,
            session_id=session_id,
            block=result.system_prompt_addition,
            recalled=result.recalled,
            candidates=result.candidates,
            skipped=result.skipped,
            estimated_tokens=result.estimated_tokens,
            window_tokens=result.window_tokens,
            lanes=result.lanes_ran,
        )
        with self._lock:
            _touch(self._assembles, agent_id, at, MAX_AGENTS)
            _touch(self._recalls, agent_id, recall, MAX_RECALLS)

    def times(self) -> dict[str, AgentTimes]:
        """Each agent's last commit and assemble (ISO-8601 UTC or None), agents in name order."""
        with self._lock:
            commits, assembles = dict(self._commits), dict(self._assembles)
        return {
            agent: AgentTimes(iso(commits.get(agent)), iso(assembles.get(agent)))
            for agent in sorted(commits.keys() | assembles.keys())
        }

    def agent(self, agent_id: str) -> tuple[float | None, float | None, Recall | None]:
        """One agent's last commit time, last assemble time and last recall (None where there is none)."""
        with self._lock:
            return self._commits.get(agent_id), self._assembles.get(agent_id), self._recalls.get(agent_id)


def _touch(entries: OrderedDict[str, V], key: str, value: V, limit: int) -> None:
    """Set ``key`` as the newest entry; forget the oldest beyond ``limit``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)
