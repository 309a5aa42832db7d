"""Catch-up: the store converges to the host's transcripts by itself, in a thread of its own.

While the sidecar is down the host keeps only the first failed ``commitTurn`` for re-delivery; every later
turn of the outage runs without the engine and is never delivered. Those turns are in the host's own
transcripts, so the sidecar reads them back with the incremental, read-only import (``reading.py``) whenever
something says it may have missed some:

- it starts: every agent the store knows (a new store knows none, so it imports nothing by itself);
- an ``assemble`` carries host messages (by window key) the store does not hold: that agent;
- a ``commit-turn`` arrives late (its newest message is older than ``LATE_S``) or out of order (older than
  what the session already holds): that agent;
- a ``bootstrap`` names a known session whose newest stored message is older than ``QUIET_S``: that session;
- a subagent ended (``SUBAGENT_DELAY_S`` later): its agent and its parent's. The host then runs the parent's
  announce turn, which it records but never commits;
- watch mode (``serve --watch``, docs/watch-mode.md): every ``LOSSLESS_WATCH_INTERVAL_S``, each agent whose
  files changed, every session, and Claude Code's transcripts with ``--claude-code``;
- every ``LOSSLESS_CATCH_UP_INTERVAL_S`` while an agent is idle (``IDLE_S``): each agent whose transcript files
  changed (size and mtime), so a recorded but never committed announce turn is stored without waiting.

The hooks only enqueue (no I/O, under a lock, microseconds); the checks and the import run here. Triggers for
one target within ``DELAY_S`` are one run, and a target runs at most once per ``MIN_INTERVAL_S``.

An agent's catch-up follows what live capture would have seen (``coverage.py``): the sessions the store holds
and sessions begun after it first heard of the agent (a subagent spawned during the outage). Message identity
(docs/how-it-works.md, "Message identity") makes an imported copy and a committed copy one message, in either order.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw_lossless.config import Settings
from openclaw_lossless.errors import InvalidSessionKey, LosslessError
from openclaw_lossless.observe.activity import Activity, iso
from openclaw_lossless.recall.window import Descriptor
from openclaw_lossless.store.backend import Backend
from openclaw_lossless.store.model.sessions import agent_of
from openclaw_lossless.transcripts.catchup_report import CatchUpBrief, CatchUpReport
from openclaw_lossless.transcripts.claude_code import AGENT as CLAUDE_CODE
from openclaw_lossless.transcripts.claude_code import fingerprint as claude_code_fingerprint
from openclaw_lossless.transcripts.claude_code import read_claude_code
from openclaw_lossless.transcripts.coverage import StoreCoverage
from openclaw_lossless.transcripts.reading import read_transcripts
from openclaw_lossless.transcripts.sink import Sink
from openclaw_lossless.transcripts.sources import AGENT_ID, SQLITE_NAME, ReadReport, transcript_session_id

log = logging.getLogger(__name__)

DELAY_S = 0.5
MIN_INTERVAL_S = 5.0
LATE_S = 60.0
QUIET_S = 300.0
IDLE_S = 20.0  # the periodic check leaves an agent alone while a turn of its began or ended this recently
SETTLE_S = 2.0  # transcript files changed this recently are looked at again by the next periodic check
SUBAGENT_DELAY_S = 5.0  # after a subagent ends: time for the parent's announce turn to be written
WINDOW_KEYS = 32  # the newest host messages an assemble's check compares: an outage's turns are the newest
STORED_SLACK = 64  # stored messages read past that many when comparing
STOP_WAIT_S = 10.0  # close() waits this long at most for the batch under way
SUMMARY_ROLES = frozenset({"compactionSummary", "branchSummary"})  # made by the host from entries, not messages
MAX_UNFIXABLE = 4096
MAX_TARGETS = 1024


class _Stopped(Exception):
    """The sidecar is closing: the import stops between pages."""


@dataclass(frozen=True)
class Target:
    agent_id: str
    session_id: str | None = None  # one session, or the whole agent (the sessions it follows)


@dataclass(frozen=True)
class Check:
    """Why a target may need catching up; evaluated in the thread (``None`` kind: no check, just run)."""

    kind: str  # "start", "window", "commit", "bootstrap", "subagent"
    session_id: str | None = None
    keys: tuple[str, ...] = ()
    newest: float | None = None  # commit: the turn's newest message time (epoch s)
    at: float = 0.0  # when the hook saw it (epoch s)
    child_key: str | None = None  # subagent: the child's session key (its parent may be another agent's)


@dataclass
class _Job:
    due: float
    checks: list[Check] = field(default_factory=list)


class CatchUp:
    """The queue of targets that may need catching up, and the thread that works it.

    Writes through ``sink`` (the ingest side); reads ``activity`` to leave an agent alone mid-turn.
    """

    def __init__(self, sink: Sink, settings: Settings, activity: Activity, *, enabled: bool) -> None:
        self.sink = sink
        self.openclaw_state = settings.openclaw_state
        self.activity = activity
        self.watch = settings.watch  # every agent and session of the state dir, looked at every interval_s
        self.claude_code = settings.claude_code_dir if settings.claude_code else None
        self.enabled = enabled or self.watch or self.claude_code is not None
        self._lock = threading.Condition()
        self._jobs: dict[Target, _Job] = {}
        self._last_run: dict[Target, float] = {}
        self._unfixable: dict[str, None] = {}  # window keys a catch-up could not bring in (insertion-ordered)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        watching = self.watch or self.claude_code is not None
        self.interval_s = float(settings.watch_interval_s if watching else settings.catch_up_interval_s)
        self._next_poll: float | None = None  # monotonic; None: no periodic check
        self._seen: dict[str, tuple[int, ...]] = {}  # agent id → its transcript files' sizes and mtimes
        self.running = False
        self.last_run_at: float | None = None
        self.last_imported = 0
        self.total_imported = 0
        self.last_error: str | None = None
        self.runs = 0
        self.looks = 0  # periodic checks done (each a few stat calls; an import only when something changed)

    # -- the hooks' side: enqueue only -------------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (the serving process only) and catch up every agent the store knows."""
        if not self.enabled or self._thread is not None:
            return
        if self.interval_s > 0:
            self._next_poll = time.monotonic() + (0.0 if self.watch or self.claude_code else self.interval_s)
        self._thread = threading.Thread(target=self._loop, name="lossless-catch-up", daemon=True)
        self._thread.start()
        self._enqueue(Target("*"), Check("start"))

    def after_assemble(self, session_id: str, session_key: str | None, descriptors: Sequence[Descriptor]) -> None:
        if not self.enabled or not descriptors:
            return
        tail = [d.key for d in descriptors[-WINDOW_KEYS:] if d.role not in SUMMARY_ROLES]
        agent = _agent(session_key)
        if tail and agent is not None:
            self._enqueue(Target(agent), Check("window", session_id, tuple(tail), at=time.time()))

    def after_commit(self, session_id: str, session_key: str | None, newest: float | None) -> None:
        agent = _agent(session_key)
        if self.enabled and newest is not None and agent is not None:
            self._enqueue(Target(agent), Check("commit", session_id, newest=newest, at=time.time()))

    def after_bootstrap(self, session_id: str, session_key: str | None) -> None:
        agent = _agent(session_key)
        if self.enabled and agent is not None:
            self._enqueue(Target(agent, session_id), Check("bootstrap", session_id, at=time.time()))

    def after_subagent_ended(self, child_key: str) -> None:
        """The parent's announce turn follows: recorded by the host, never committed (a few seconds later)."""
        agent = _agent(child_key)
        if self.enabled and agent is not None:
            check = Check("subagent", child_key=child_key, at=time.time())
            self._enqueue(Target(agent), check, delay=SUBAGENT_DELAY_S)

    def catch_up_now(self, agent_id: str, session_id: str | None = None) -> int:
        """Catch up one agent (or one session) in the caller's thread; returns the messages stored."""
        coverage = StoreCoverage.load(self.sink.store.ops, self.sink.store.db.reader())
        return self._import(Target(agent_id, session_id), coverage, {session_id} if session_id else set())

    def _enqueue(self, target: Target, check: Check, *, delay: float = DELAY_S) -> None:
        now = time.monotonic()
        with self._lock:
            job = self._jobs.get(target)
            if job is None:
                earliest = self._last_run.get(target, -MIN_INTERVAL_S) + MIN_INTERVAL_S
                job = self._jobs[target] = _Job(max(now + delay, earliest))
            elif delay > DELAY_S:
                job.due = max(job.due, now + delay)
            # The newest check of a kind for a session replaces the older one: it says all they said.
            job.checks = [c for c in job.checks if (c.kind, c.session_id) != (check.kind, check.session_id)]
            job.checks.append(check)
            self._lock.notify()

    # -- state ---------------------------------------------------------------------------------------------

    def brief(self) -> CatchUpBrief:
        """What ``/healthz`` shows under ``catchUp``: ``state`` is ``off`` (LOSSLESS_CATCH_UP=false), ``idle``
        or ``running``; ``pending``: targets queued."""
        with self._lock:
            pending = len(self._jobs)
        return CatchUpBrief(self._state(), iso(self.last_run_at), self.last_error, pending, self.watching)

    def view(self) -> CatchUpReport:
        """What ``/stats`` shows under ``catchUp``: the brief, and what the runs imported."""
        with self._lock:
            pending = len(self._jobs)
        return CatchUpReport(
            self._state(),
            iso(self.last_run_at),
            self.last_error,
            self.last_imported,
            self.total_imported,
            pending,
            self.runs,
            self.watching,
        )

    @property
    def watching(self) -> tuple[str, ...]:
        return (*(("openclaw",) if self.watch else ()), *(("claude-code",) if self.claude_code else ()))

    def _state(self) -> str:
        return "off" if not self.enabled else ("running" if self.running else "idle")

    def close(self) -> bool:
        """Stop the thread, waiting up to ``STOP_WAIT_S`` for the batch under way; whether it has ended."""
        self._stop.set()
        with self._lock:
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join(STOP_WAIT_S)
        return self._thread is None or not self._thread.is_alive()

    # -- the thread ----------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            due = self._next_due()
            if due is None:
                continue
            target, job = due
            if target.agent_id == "" and not self._stop.is_set():
                self._poll_safely()
                continue
            try:
                self._run(target, job)
            except _Stopped:
                return
            except Exception as exc:  # the thread's edge: the next trigger tries again, the state says why
                if self._stop.is_set():
                    return
                self.last_error = _reason(exc)
                log.warning(
                    "catch-up of agent %s failed: %s",
                    target.agent_id,
                    self.last_error,
                    exc_info=not isinstance(exc, LosslessError),
                )
            finally:
                self.running = False
                with self._lock:
                    now = time.monotonic()
                    self._last_run[target] = now
                    if len(self._last_run) > MAX_TARGETS:  # only the last MIN_INTERVAL_S matter: forget the rest
                        self._last_run = {t: at for t, at in self._last_run.items() if now - at < MIN_INTERVAL_S}

    def _next_due(self) -> tuple[Target, _Job] | None:
        """The next job due; the periodic check (``Target("")``) when nothing else is and its time has come."""
        with self._lock:
            while not self._stop.is_set():
                now = time.monotonic()
                ready = [(job.due, target) for target, job in self._jobs.items() if job.due <= now]
                if ready:
                    target = min(ready, key=lambda pair: pair[0])[1]
                    self.running = True
                    return target, self._jobs.pop(target)
                if self._next_poll is not None and self._next_poll <= now:
                    self._next_poll = now + self.interval_s
                    return Target(""), _Job(now)
                waits = [job.due - now for job in self._jobs.values()]
                if self._next_poll is not None:
                    waits.append(self._next_poll - now)
                self._lock.wait(min(waits) if waits else None)
        return None

    # -- the periodic check --------------------------------------------------------------------------------

    def _poll_safely(self) -> None:
        try:
            self.poll()
        except _Stopped:
            return
        except Exception as exc:  # the thread's edge: the next check tries again, the state says why
            self.last_error = _reason(exc)
            log.warning("catch-up check failed: %s", self.last_error, exc_info=not isinstance(exc, LosslessError))
        finally:
            self.running = False

    def poll(self) -> int:
        """Catch up every idle agent whose transcript files changed since the last look; returns what it stored.

        Costs a query for the store's agents and a few ``stat`` calls per agent; reads no transcript unless one
        changed, and then only what is past the cursors (the import's own plan).
        """
        stored = self._poll_claude_code() if self.claude_code is not None else 0
        state = self.openclaw_state
        if not state.is_dir():
            self.looks += 1
            return stored
        conn = self.sink.store.db.reader()
        agents = _state_agents(state) if self.watch else sorted(self.sink.store.ops.sessions.agent_ids(conn))
        now, coverage = time.time(), None
        for agent in agents:
            if self._stop.is_set():
                break
            if not self._idle(agent, now):
                continue  # looked at again next time: its fingerprint is not taken
            seen = fingerprint(state, agent)
            if seen is None or self._seen.get(agent) == seen:
                continue
            coverage = coverage or StoreCoverage.load(self.sink.store.ops, conn)
            self.running = True
            stored += self._import(Target(agent), coverage, set())
            if self.last_error is None and not _settling(seen, now):  # else it proves nothing: looked at again
                self._seen[agent] = seen
        self.looks += 1
        return stored

    def _poll_claude_code(self) -> int:
        """Watch mode's look at Claude Code's transcripts: imported when their files changed."""
        assert self.claude_code is not None
        seen = claude_code_fingerprint(self.claude_code)
        if seen is None or self._seen.get(CLAUDE_CODE + "\0") == seen:
            return 0
        self.running = True
        report = read_claude_code(self.sink, self.claude_code, progress=self._check_stop)
        self._note(report)
        if self.last_error is None and not _settling(seen, time.time()):
            self._seen[CLAUDE_CODE + "\0"] = seen
        return report.messages_imported

    def _idle(self, agent: str, now: float) -> bool:
        committed, assembled, _ = self.activity.agent(agent)
        latest = max((at for at in (committed, assembled) if at is not None), default=None)
        return latest is None or now - latest >= IDLE_S

    def _run(self, target: Target, job: _Job) -> None:
        conn = self.sink.store.db.reader()
        if target.agent_id == "*":
            coverage = StoreCoverage.load(self.sink.store.ops, conn)
            for agent in coverage.agents:
                self._import(Target(agent), coverage, set())
            return
        needed = [check for check in job.checks if self._needed(conn, check)]
        if not needed:
            return
        coverage = StoreCoverage.load(self.sink.store.ops, conn)
        touched = {c.session_id for c in needed if c.session_id is not None}
        self._import(target, coverage, touched)
        parents = _parent_agents(self.sink.store.ops, conn, needed) - {target.agent_id}  # a subagent's other agent
        for parent in sorted(parents):
            self._import(Target(parent), coverage, set())
        if self.last_error is not None:  # a failed read proves nothing: the next trigger tries again
            return
        for check in needed:
            if check.kind == "window":
                self._remember_unfixable(self.sink.store.db.reader(), check)

    def _import(self, target: Target, coverage: StoreCoverage, touched: set[str]) -> int:
        """Run the incremental import for the target; a session a hook named is followed whatever its age.

        Returns the messages it stored.
        """
        if self._stop.is_set():
            return 0
        state = self.openclaw_state
        if not state.is_dir():
            self.last_error = "no OpenClaw state dir: set OPENCLAW_STATE_DIR (or LOSSLESS_OPENCLAW_STATE)"
            return 0

        def follow(agent_id: str, session_id: str, recorded: str | None, born_ms: int | None) -> bool:
            return session_id in touched or coverage.follows(agent_id, session_id, recorded, born_ms)

        report = read_transcripts(
            self.sink,
            state,
            agent=target.agent_id,
            session_id=target.session_id,
            follow=None if self.watch else follow,  # watch mode: every session the host records
            progress=self._check_stop,
        )
        self._note(report)
        if report.messages_imported:  # stored through the ingest side, which also wakes the embedding worker
            log.info(
                "%s stored %d message(s) of agent %s from the host's transcripts",
                "watch" if self.watch else "catch-up",
                report.messages_imported,
                target.agent_id,
            )
        return report.messages_imported

    def _note(self, report: ReadReport) -> None:
        """What a run came to, for /healthz, /stats and /metrics."""
        self.runs += 1
        self.last_run_at = time.time()
        self.last_imported = report.messages_imported
        self.total_imported += report.messages_imported
        errors = [d.error for d in report.details if d.error]
        self.last_error = _first_line(errors[0]) if errors else None

    def _check_stop(self, done: int, total: int) -> None:
        """Called after each page the import reads: a closing sidecar stops it there (what is stored stays,
        its cursor saved; the next start goes on from it)."""
        if self._stop.is_set():
            raise _Stopped

    # -- the checks ----------------------------------------------------------------------------------------

    def _needed(self, conn: Any, check: Check) -> bool:
        if check.kind == "window":
            return bool(self._missing_keys(conn, check))
        if check.kind == "commit":
            assert check.newest is not None
            late = check.at - check.newest > LATE_S
            return late or _holds_newer(self.sink.store.ops, conn, check.session_id, check.newest)
        if check.kind == "bootstrap":
            newest = _newest_stored(self.sink.store.ops, conn, check.session_id)
            return newest is None or check.at - newest > QUIET_S
        return True

    def _missing_keys(self, conn: Any, check: Check) -> list[str]:
        """The check's host messages the store does not hold (nor could a catch-up bring in before).

        Counted, not just looked up: two tool results with the same text in the same millisecond share a
        window key, and holding one of them is not holding both.
        """
        keys = [key for key in check.keys if key not in self._unfixable]
        if not keys or check.session_id is None:
            return []
        session = self.sink.store.ops.sessions.find_session(conn, check.session_id)
        if session is None:
            return keys
        newest = self.sink.store.ops.messages.newest_window_keys(conn, session.rowid, len(keys) + STORED_SLACK)
        stored = Counter(key for _, key in newest)
        missing = []
        for key in keys:
            if stored[key] > 0:
                stored[key] -= 1
            else:
                missing.append(key)
        return missing

    def _remember_unfixable(self, conn: Any, check: Check) -> None:
        """Keys still missing after a catch-up (e.g. a message the transcript does not hold as one) are not
        a gap again: without this, every turn would run an import that cannot help."""
        for key in self._missing_keys(conn, check):
            self._unfixable[key] = None
        while len(self._unfixable) > MAX_UNFIXABLE:
            del self._unfixable[next(iter(self._unfixable))]


def fingerprint(state: Path, agent: str) -> tuple[int, ...] | None:
    """Sizes and mtimes of an agent's transcript files (its SQLite database and WAL, its JSONL transcripts):
    what changes whenever the host records anything. None when the agent has none."""
    agent_dir = state / "agents" / agent
    if not AGENT_ID.match(agent):
        return None
    database = agent_dir / "agent" / SQLITE_NAME
    found: list[int] = []
    for path in (database, database.with_name(SQLITE_NAME + "-wal")):
        with contextlib.suppress(OSError):
            stat = path.stat()
            found += [stat.st_size, stat.st_mtime_ns]
    with contextlib.suppress(OSError), os.scandir(agent_dir / "sessions") as entries:
        for entry in entries:
            if transcript_session_id(entry.name) is not None:
                with contextlib.suppress(OSError):
                    stat = entry.stat()
                    found += [stat.st_size, stat.st_mtime_ns]
    return tuple(found) if found else None


def _state_agents(state: Path) -> list[str]:
    """The agents with a folder under the state dir's ``agents/`` (watch mode looks at each)."""
    with contextlib.suppress(OSError), os.scandir(state / "agents") as entries:
        return sorted(entry.name for entry in entries if entry.is_dir() and AGENT_ID.match(entry.name))
    return []


def _settling(seen: tuple[int, ...], now: float) -> bool:
    """Whether a file of this fingerprint changed within ``SETTLE_S``: a write may still be under way.

    The host's SQLite writes its WAL frames before it publishes them in the ``-shm`` index (not fingerprinted:
    it is written through a memory map), so a read in between sees the old snapshot, and the files then stay
    as they are. Such a look is not remembered as done.
    """
    newest = max(seen[1::2], default=0) / 1e9
    return now - newest < SETTLE_S


def _parent_agents(ops: Backend, conn: Any, checks: Sequence[Check]) -> set[str]:
    """The agents of the parents of the subagents these checks say ended."""
    parents: set[str] = set()
    for check in checks:
        if check.kind != "subagent" or check.child_key is None:
            continue
        parent = ops.sessions.parent_key(conn, check.child_key)
        agent = _agent(parent) if parent is not None else None
        if agent is not None:
            parents.add(agent)
    return parents


def _agent(session_key: str | None) -> str | None:
    """The agent a hook's session key names; None for a key the hook let through but that names none (no
    catch-up for it: a hook never fails because of catch-up)."""
    try:
        return agent_of(session_key)
    except InvalidSessionKey:
        return None


def _holds_newer(ops: Backend, conn: Any, session_id: str | None, newest: float) -> bool:
    """Whether the session's newest stored messages include one later than the turn's newest (out of order)."""
    session = ops.sessions.find_session(conn, session_id) if session_id is not None else None
    if session is None:
        return False
    latest = ops.transcript_ledger.newest_time(conn, session.rowid, among=STORED_SLACK)
    return latest is not None and latest > newest + 0.001


def _newest_stored(ops: Backend, conn: Any, session_id: str | None) -> float | None:
    session = ops.sessions.find_session(conn, session_id) if session_id is not None else None
    if session is None:
        return None
    return ops.transcript_ledger.newest_time(conn, session.rowid)


def _reason(exc: Exception) -> str:
    """A reason without message text: the error's own message for ours, else its type."""
    if isinstance(exc, LosslessError):
        return _first_line(exc.message)
    return f"{type(exc).__name__}: see the sidecar log"


def _first_line(text: str) -> str:
    return text.splitlines()[0][:300] if text else text
