"""Every write of the conversation record: turns, messages outside a turn, a first session's history,
compactions, subagents and named snapshots.

Why one room: the writes share one discipline. Every message is captured before anything is written (one bad
message rejects the whole request), each request is one transaction, and after it the embedding worker is
woken and, now and then, the size cap checked; nothing heavy runs on the turn's path. The history import
(``transcripts/``) writes through this same object (``transcripts.sink.Sink``), so an imported message and a
committed one are captured, redacted and selected alike, and catch-up (which it owns) is told what the hooks
saw.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, capture
from openclaw_lossless.config import RecallSettings, Settings
from openclaw_lossless.embed.in_flight import InFlight, counted
from openclaw_lossless.embed.worker import EmbeddingWorker
from openclaw_lossless.observe.activity import Activity
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.service.size_cap import SizeCap
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.messages import turn_identities
from openclaw_lossless.store.model.sessions import agent_of, check_identifier
from openclaw_lossless.store.model.snapshots import Compaction, CompactionRecord
from openclaw_lossless.transcripts import read_session, skipped
from openclaw_lossless.transcripts.catchup import CatchUp
from openclaw_lossless.transcripts.feed import claim_imported
from openclaw_lossless.transcripts.sources import AGENT_ID, SAFE_SESSION_ID


@dataclasses.dataclass(frozen=True)
class Committed:
    """A turn's commit: ``committed`` or ``duplicate`` (its advancement key was seen), messages stored."""

    status: str
    stored: int
    skipped_heartbeat: bool


@dataclasses.dataclass(frozen=True)
class Bootstrapped:
    """A session registered: how many of its existing messages were imported, and why that many."""

    bootstrapped: bool
    imported_messages: int
    reason: str


@dataclasses.dataclass(frozen=True)
class Ended:
    """A subagent ended: whether it was linked to a parent, and how many outcome records were copied."""

    ended: bool
    outcomes_copied: int


@dataclasses.dataclass(frozen=True)
class SnapshotMade:
    """A snapshot just named: the session and the last message it marks."""

    name: str
    session_id: str
    last_message_id: int | None


class Ingest:
    """The write side: what the host's write hooks and the operator's ``snapshot create`` do to the store."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        selection: SessionSelection,
        capture_options: CaptureOptions,
        activity: Activity,
        metrics: Metrics,
        worker: EmbeddingWorker | None,
        size_cap: SizeCap,
        in_flight: InFlight | None = None,
    ) -> None:
        self.store = store  # the history import writes through it too (``transcripts.sink.Sink``)
        self.db, self.ops = store.db, store.ops
        self.openclaw_state = settings.openclaw_state
        self.selection = selection
        self.capture_options = capture_options
        self.activity = activity
        self.metrics = metrics
        self.worker = worker
        self.size_cap = size_cap
        self.in_flight = in_flight or InFlight()  # commit-turn counts as a request (embed/in_flight.py)
        # Catch-up imports through this object; its thread starts with the server (app.py).
        self.catch_up = CatchUp(self, settings, activity, enabled=settings.catch_up)

    # -- what follows a write (also ``transcripts.sink.Sink``) -------------------------------------------------

    def wake_worker(self) -> None:
        """New messages wait on the backlog: the worker embeds them now instead of at its next poll."""
        if self.worker is not None:
            self.worker.notify()

    def after_write(self, stored: int) -> None:
        """Stored messages wait on the backlog for the worker; the size check runs in a thread of its own."""
        if stored:
            self.wake_worker()
        self.size_cap.check_soon()

    def _records(self, raw: Sequence[Any]) -> list[MessageRecord]:
        """Capture every message before any write: one bad message rejects the whole request."""
        now = time.time()
        return [capture(message, self.capture_options, now=now) for message in raw]

    # -- the host's hooks ----------------------------------------------------------------------------------

    @counted
    def commit_turn(
        self,
        advancement_key: str,
        session_id: str,
        session_key: str | None,
        raw: Sequence[Any],
        *,
        heartbeat: bool,
        recall: RecallSettings,
    ) -> Committed:
        """Store a turn's messages and its advancement key in one transaction; a replayed key writes nothing."""
        check_identifier(advancement_key, "advancementKey")
        if not self.selection.captures(session_id, session_key):  # committed: the host must not retry it
            return Committed("committed", 0, False)
        skip = heartbeat and recall.skip_heartbeats
        records = [] if skip else turn_identities(self._records(raw), advancement_key)
        agent: list[str] = []

        def work(conn: Any) -> tuple[str, list[int]]:
            session = self.ops.sessions.ensure_session(conn, session_id, session_key)
            agent[:] = [session.agent_id]
            status, ids = self.ops.messages.commit_turn(conn, session, advancement_key, records, heartbeat=heartbeat)
            if skip and status == "committed":  # so that catch-up and import leave them out too
                skipped.remember(self.ops, conn, session_id, raw)
            return status, ids

        began = time.perf_counter()
        status, ids = self.db.write(work)
        if status == "committed":
            self.activity.committed(agent[0], time.time())
        self._count_commit(status, len(ids), time.perf_counter() - began)
        self.after_write(len(ids))
        if status == "committed" and records:  # a late or out-of-order turn: the host may hold more we missed
            self.catch_up.after_commit(session_id, session_key, max(record.created_at for record in records))
        return Committed(status, len(ids), skip)

    def _count_commit(self, status: str, stored: int, seconds: float) -> None:
        """The turn's latency and outcome for ``/stats`` and ``/metrics`` (counters only: no I/O on the turn)."""
        self.metrics.observe("commit-turn", seconds)
        self.metrics.counters[f"turns_{status}"] += 1
        self.metrics.stored["commit-turn"] += stored

    def ingest(
        self, session_id: str, session_key: str | None, raw: Sequence[Any], *, heartbeat: bool, recall: RecallSettings
    ) -> int:
        """Store messages outside a durable turn; re-sent messages are stored once (content identity)."""
        if not self.selection.captures(session_id, session_key):
            return 0
        if heartbeat and recall.skip_heartbeats:  # recorded, so that catch-up and import leave them out too
            check_identifier(session_id, "sessionId")
            self.db.write(lambda conn: skipped.remember(self.ops, conn, session_id, raw))
            return 0
        records = self._records(raw)

        def work(conn: Any) -> list[int]:
            return self.ops.messages.insert_records(
                conn, self.ops.sessions.ensure_session(conn, session_id, session_key), records
            )

        ids = self.db.write(work)
        self.metrics.stored["ingest"] += len(ids)
        self.after_write(len(ids))
        return len(ids)

    def after_turn(
        self, session_id: str, session_key: str | None, raw: Sequence[Any], *, heartbeat: bool, recall: RecallSettings
    ) -> int:
        """A turn of a host without durable turns, read from the host's own transcript file when it keeps one.

        OpenClaw 2026.7.33+ writes a session's transcript to ``sessions/<id>.jsonl`` and hands ``afterTurn`` the
        run's in-memory copies, whose user messages differ from the file's (text blocks and a later timestamp
        instead of a string and the queued one): storing both would keep those twice once catch-up reads the
        file. So the file is the one source there (flushed before ``afterTurn``); without one, the messages as
        given (see docs/decisions/0220-host-lines.md).
        """
        agent = agent_of(session_key) if session_key else None
        if heartbeat or agent is None or not self._transcript_file(agent, session_id):
            return self.ingest(session_id, session_key, raw, heartbeat=heartbeat, recall=recall)
        if not self.selection.captures(session_id, session_key):
            return 0
        return self.catch_up.catch_up_now(agent, session_id)

    def _transcript_file(self, agent: str, session_id: str) -> bool:
        if not AGENT_ID.match(agent) or not SAFE_SESSION_ID.match(session_id):
            return False
        return (self.openclaw_state / "agents" / agent / "sessions" / f"{session_id}.jsonl").is_file()

    def bootstrap(self, session_id: str, session_key: str | None) -> Bootstrapped:
        """Register the session, importing its existing OpenClaw history the first time it is seen.

        Cheap when the session is already known: one read, no write.
        """
        check_identifier(session_id, "sessionId")
        if not self.selection.captures(session_id, session_key):
            return Bootstrapped(True, 0, "excluded")
        known = self.ops.sessions.find_session(self.db.reader(), session_id)
        if known is not None and (known.session_key is not None or session_key is None):
            self.catch_up.after_bootstrap(session_id, known.session_key)  # seen again after a gap? (in its thread)
            return Bootstrapped(True, 0, "known")
        imported = 0
        if known is None:
            imported = read_session(self, self.openclaw_state, session_id, agent_of(session_key))
            self.after_write(imported)
        self.db.write(lambda conn: self.ops.sessions.ensure_session(conn, session_id, session_key))
        return Bootstrapped(True, imported, "imported" if imported else "registered")

    def compact(self, session_id: str, session_key: str | None, record: CompactionRecord) -> Compaction:
        """Record the host's compaction. Its summary is the host model's retelling of the turns it replaced, so it
        can quote whatever they held: it is redacted like a message before it is stored, and so is the reason."""
        redact = self.capture_options.redactor.redact_optional
        record = dataclasses.replace(record, summary=redact(record.summary), reason=redact(record.reason))

        def work(conn: Any) -> Compaction:
            # a catch-up may have imported it already
            session = self.ops.sessions.ensure_session(conn, session_id, session_key)
            return claim_imported(self.ops, conn, session, record) or self.ops.snapshots.record_compaction(
                conn, session, record
            )

        return self.db.write(work)

    def subagent_spawn(self, parent_key: str, child_key: str, context_mode: str | None) -> int:
        """Link the child's session to its parent's (the spawn id); recall then follows the link."""
        return self.db.write(lambda conn: self.ops.subagents.link(conn, parent_key, child_key, context_mode))

    def subagent_rollback(self, spawn_id: int | None, child_key: str | None) -> bool:
        """Undo a spawn the host gave up on: the link and the child's registered session both go."""
        return self.db.write(lambda conn: self.ops.subagents.unlink(conn, spawn_id, child_key))

    def subagent_ended(self, child_key: str, reason: str) -> Ended:
        """Copy the child's outcome into its parent's recall; the parent's announce turn is caught up later."""
        reason = self.capture_options.redactor.redact(reason)  # free text from the host, stored: redacted
        linked, copied = self.db.write(lambda conn: self.ops.subagents.end(conn, child_key, reason))
        self.after_write(copied)
        self.catch_up.after_subagent_ended(child_key)  # the parent's announce turn is never committed
        return Ended(linked, copied)

    # -- the operator's -------------------------------------------------------------------------------------

    def snapshot_create(self, name: str, session_id: str | None) -> SnapshotMade:
        """Name the point a session has reached (the most recently active one when none is named)."""
        conn = self.db.reader()
        sessions = self.ops.sessions
        session = sessions.require_session(conn, session_id) if session_id else sessions.latest_session(conn)
        last = self.db.write(lambda conn: self.ops.snapshots.create_snapshot(conn, session, name))
        return SnapshotMade(name, session.session_id, last)
