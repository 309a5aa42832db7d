"""Per-agent activity: when each agent last committed a turn and last assembled, and its recent recalls.

Why: the failure users of memory plugins meet most is silence. Memory stops, turns keep working, and nobody
notices for days. ``/healthz`` and ``/stats`` show these times per agent so a monitor can alert on silence, and
the ``/lossless`` chat command shows the last turn's Recalled Context with why each line was kept or dropped,
and the web UI's recall page any of an agent's recent turns (a user asks about the answer before last too).

What it costs the turn: nothing is computed for it. ``assembled`` keeps a reference to what assemble built
anyway (the block, the recalled list, the scored candidates, which hold numbers and ids, no text); the trace
dicts are built only when someone asks for them; keeping one more recall is a deque append and a counter.
Memory is bounded: the last ``RECALLS_PER_AGENT`` recalls of at most ``MAX_RECALLS`` agents (the least
recently assembling agent is forgotten first), and at most ``MAX_KEPT_RECALLS`` in all: beyond that the older
turns of the agents that assembled least recently go first, but every agent keeps its last one (what
``/v1/agents/{id}/last-recall`` and ``/lossless`` answer). A recall holds its block (within the recall
budget) and its candidates' numbers: about 125 KB for the 156 candidates of a question to 300 turns, so some
16 MB at most in all. Each is numbered (``turn``, counting this sidecar's assembles from 1), so a page can
name it. Only redacted text is kept: the block is built from stored text, which is always redacted; the query
(the raw prompt) is not kept at all.

After a restart the last commit time per agent is read back from the store (``from_store``): one short index
lookup per session, never a scan of the turns. The last assemble time and recall are not persisted: until
the first assemble after a start they are null.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict, deque
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from openclaw_lossless.recall.assemble import AssembleResult, Recalled
from openclaw_lossless.recall.scoring import Candidate
from openclaw_lossless.store.backend import Store

MAX_AGENTS = 10_000
MAX_RECALLS = 64  # agents whose recalls are kept
RECALLS_PER_AGENT = 20
MAX_KEPT_RECALLS = 128  # recalls kept in all (each agent keeps at least its last)

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
    """One assemble's outcome, as built by the assembler (referenced, not copied); ``turn`` numbers it."""

    turn: int
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
        self._recalls: OrderedDict[str, deque[Recall]] = OrderedDict()
        self._kept = 0  # recalls in all the deques
        self._turns = 0  # assembles since the start: the last one's number

    @classmethod
    def from_store(cls, store: Store) -> Activity:
        """The last commit time of every agent the store knows, read with one indexed query."""
        return cls(store.ops.agents.last_commits(store.db.reader()))

    def committed(self, agent_id: str, at: float) -> None:
        with self._lock:
            _touch(self._commits, agent_id, at, MAX_AGENTS)

    def assembled(self, agent_id: str, session_id: str, result: AssembleResult, at: float) -> None:
        with self._lock:
            self._turns += 1
            recall = Recall(
                turn=self._turns,
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
            _touch(self._assembles, agent_id, at, MAX_AGENTS)
            self._keep(agent_id, recall)

    def _keep(self, agent_id: str, recall: Recall) -> None:
        """Keep ``recall`` as the agent's newest; forget beyond the bounds (caller holds the lock)."""
        kept = self._recalls.get(agent_id)
        if kept is None:
            kept = deque(maxlen=RECALLS_PER_AGENT)
        elif len(kept) == RECALLS_PER_AGENT:
            self._kept -= 1  # the append below drops the oldest
        kept.append(recall)
        self._kept += 1
        self._recalls[agent_id] = kept
        self._recalls.move_to_end(agent_id)
        while len(self._recalls) > MAX_RECALLS:
            self._kept -= len(self._recalls.popitem(last=False)[1])
        for older in self._recalls.values():  # least recently assembling agents first
            while self._kept > MAX_KEPT_RECALLS and len(older) > 1:
                older.popleft()
                self._kept -= 1
            if self._kept <= MAX_KEPT_RECALLS:
                break

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
            kept = self._recalls.get(agent_id)
            return self._commits.get(agent_id), self._assembles.get(agent_id), kept[-1] if kept else None

    def recalls(self, agent_id: str) -> list[Recall]:
        """The agent's recalls still kept, newest first (empty: none since the start, or forgotten)."""
        with self._lock:
            return list(reversed(self._recalls.get(agent_id, ())))


def _touch(entries: OrderedDict[str, V], key: str, value: V, limit: int) -> None:
    """Set ``key`` as the newest entry; forget the oldest beyond ``limit``."""
    entries[key] = value
    entries.move_to_end(key)
    while len(entries) > limit:
        entries.popitem(last=False)
