"""A session's timeline: the page of messages with the compactions, snapshots and spawns around it.

Both backends assemble it here from their reads (``TimelineReads``), so ``/timeline`` answers the same on
either store.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from openclaw_lossless.store.model.messages import MessageView
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import CompactionMark

NO_MESSAGE = 0  # where a compaction or snapshot of a session that held no message yet sits: before every one
NO_END = 2**62  # an id above any message's: a range without an upper bound


KeyNeighbour = tuple[str, float]  # a session of the same key: its id and when it began


@dataclass(frozen=True)
class SessionSummary:
    """A session for the index of timelines: whose it is, how much it holds, when it was last active."""

    session_id: str
    session_key: str | None
    agent_id: str
    created_at: float
    messages: int
    last_message_at: float | None
    spawned_by: str | None  # the parent's session key when this is a subagent's session


@dataclass(frozen=True)
class SnapshotMark:
    """A snapshot an operator named, after the last message it marks."""

    name: str
    created_at: float
    last_message_id: int | None


@dataclass(frozen=True)
class SpawnMark:
    """A subagent spawned from this session: the child's key and its session (None: not registered)."""

    child_key: str
    child_session_id: str | None
    spawned_at: float
    context_mode: str | None
    ended_at: float | None
    ended_reason: str | None


@dataclass(frozen=True)
class Parent:
    """The session a subagent's session was spawned from (None when that session is gone)."""

    parent_key: str
    parent_session_id: str | None
    spawned_at: float
    context_mode: str | None
    ended_at: float | None
    ended_reason: str | None


@dataclass(frozen=True)
class Window:
    """Which page: the newest ``limit`` messages before ``before``, the oldest after ``after``, or around ``at``."""

    limit: int
    before: int | None = None
    after: int | None = None
    at: int | None = None


@dataclass(frozen=True)
class Timeline:
    """One page of a session's timeline, with the ids that lead to the pages either side."""

    session: SessionRef
    created_at: float
    messages: list[MessageView]
    total: int
    older: int | None  # the first id on the page when older messages exist (the older page's ``before``)
    newer: int | None  # the last id on the page when newer messages exist (the newer page's ``after``)
    compactions: list[CompactionMark]
    snapshots: list[SnapshotMark]
    spawns: list[SpawnMark]
    previous_session: str | None  # the session of the same key before the /new that began this one
    next_session: str | None  # the session the next /new began
    parent: Parent | None


class TimelineReads(Protocol):
    """The reads one timeline page needs, each bound to a backend's connection and the page's session.

    Both backends read through ``store/statements/timeline.py``, which supplies only these statements;
    ``assemble_timeline`` decides what is read in which order and where the page's events start and end, so
    the web UI draws the same page from either store.
    """

    def messages(self, op: str, value: int, descending: bool, limit: int) -> list[MessageView]:
        """Up to ``limit`` of the session's messages whose id is ``op`` (``<``, ``>``, ``>=``) ``value``."""
        ...

    def neighbour(self, message_id: int, *, older: bool) -> tuple[int, float] | None:
        """The id and time of the message just before (or after) ``message_id``: is there a page that way."""
        ...

    def count(self) -> int: ...

    def created_at(self) -> float: ...

    def key_neighbours(self, key: str, created_at: float) -> tuple[KeyNeighbour | None, KeyNeighbour | None]:
        """The sessions of the key just before and after this one (a ``/new`` apart)."""
        ...

    def compactions(self, low: int, high: int) -> list[CompactionMark]:
        """The compactions placed after a message in ``[low, high)``."""
        ...

    def snapshots(self, low: int, high: int) -> list[SnapshotMark]:
        """The snapshots an operator named placed after a message in ``[low, high)``."""
        ...

    def first_of_key(self, key: str) -> bool:
        """Whether this session is the first of its key."""
        ...

    def spawns(self, key: str, start: float, end: float) -> list[SpawnMark]:
        """The subagents spawned from ``key`` in ``[start, end)``."""
        ...

    def parent(self, key: str) -> Parent | None:
        """Who spawned the session of ``key``, and the parent's session that was current then."""
        ...


def assemble_timeline(session: SessionRef, window: Window, reads: TimelineReads) -> Timeline:
    """The page ``window`` names and its events, from either backend's ``reads`` (both use this, so the page's
    bounds and each event's place are one rule, not two copies of it)."""
    page = window_page(window, reads)
    first, last = (page[0].id, page[-1].id) if page else (None, None)
    before = reads.neighbour(first, older=True) if first is not None else None
    after = reads.neighbour(last, older=False) if last is not None else None
    low = NO_MESSAGE - 1 if before is None else before[0]  # the oldest page holds what came before any message
    high = NO_END if after is None or last is None else last  # the newest page holds what came after its last
    created_at = reads.created_at()
    key = session.session_key
    previous, following = (None, None) if key is None else reads.key_neighbours(key, created_at)
    times = (None if before is None else before[1], None if after is None else page[-1].created_at)
    return Timeline(
        session=session,
        created_at=created_at,
        messages=page,
        total=reads.count(),
        older=first if before is not None else None,
        newer=last if after is not None else None,
        compactions=reads.compactions(low, high),
        snapshots=reads.snapshots(low, high),
        spawns=[]
        if key is None
        else reads.spawns(key, *spawn_span(created_at, reads.first_of_key(key), following, times)),
        previous_session=None if previous is None else previous[0],
        next_session=None if following is None else following[0],
        parent=None if key is None else reads.parent(key),
    )


def session_summaries_of(rows: Iterable[Sequence[Any]]) -> list[SessionSummary]:
    """Summary rows (session id and key, agent, created at, messages, newest message, parent key), either store."""
    return [SessionSummary(str(r[0]), r[1], str(r[2]), float(r[3]), int(r[4]), r[5], r[6]) for r in rows]


def snapshot_marks(rows: Iterable[Sequence[Any]]) -> list[SnapshotMark]:
    """Snapshot rows (name, created at, last message id) as marks, either store."""
    return [SnapshotMark(str(r[0]), float(r[1]), r[2]) for r in rows]


def spawn_marks(rows: Iterable[Sequence[Any]]) -> list[SpawnMark]:
    """Spawn rows (child key, spawned at, context mode, ended at, ended reason, child session) as marks."""
    return [SpawnMark(str(r[0]), r[5], float(r[1]), r[2], r[3], r[4]) for r in rows]


def compaction_marks(rows: Iterable[Sequence[Any]]) -> list[CompactionMark]:
    """Compaction rows (id, recorded at, status, reason, tokens before and after, last message, snapshot)."""
    return [CompactionMark(int(r[0]), float(r[1]), str(r[2]), r[3], r[4], r[5], r[6], r[7]) for r in rows]


def parent_mark(link: Sequence[Any], found: Sequence[Any] | None) -> Parent:
    """A link row (parent key, spawned at, context mode, ended at, ended reason) and the parent's session then."""
    return Parent(str(link[0]), None if found is None else str(found[0]), float(link[1]), link[2], link[3], link[4])


def key_neighbour(row: Sequence[Any] | None) -> KeyNeighbour | None:
    """A ``(session_id, created_at)`` row of the same key, or None."""
    return None if row is None else (str(row[0]), float(row[1]))


def window_page(window: Window, reads: TimelineReads) -> list[MessageView]:
    """The messages of the page ``window`` names, oldest first (both backends' pages, through their reads)."""
    if window.at is not None:  # the message and what led to it: half the page before it
        older = reads.messages("<", window.at, True, window.limit // 2)
        return older[::-1] + reads.messages(">=", window.at, False, window.limit - len(older))
    if window.after is not None:
        return reads.messages(">", window.after, False, window.limit)
    before = window.before if window.before is not None else NO_END
    return reads.messages("<", before, True, window.limit)[::-1]


def spawn_span(
    created_at: float, first_of_key: bool, following: KeyNeighbour | None, times: tuple[float | None, float | None]
) -> tuple[float, float]:
    """When spawns that belong on this page happened, ``[start, end)``; both backends read spawns in it.

    A spawn names the parent's key, not its session: it belongs to the session of that key that had begun and
    not yet been replaced by a ``/new`` when it happened (the first session of a key also takes any spawn
    before it began), and to this page when it falls between the page's times (None: no bound that way).
    """
    span_start = float("-inf") if first_of_key else created_at
    span_end = float("inf") if following is None else following[1]
    low, high = times
    return (span_start if low is None else max(span_start, low), span_end if high is None else min(span_end, high))
