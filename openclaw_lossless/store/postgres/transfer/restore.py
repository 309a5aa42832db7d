"""Restore on PostgreSQL (``import --jsonl``): an export or archive file's lines, checked, written into the store.

The meaning is the SQLite restore's (``store/sqlite/transfer/restore.py``): a file is untrusted input,
every line is parsed and captured by the shared parser (``store/sqlite/transfer/lines.py``) before any
write, a line the checks missed but the server refuses costs that line, ids are kept when free and
remapped when taken, and importing a file twice stores nothing the second time.

What PostgreSQL adds:

- An id kept from the file is inserted into an identity column, which does not move its sequence: the
  sequence is set past it first, or the next turn committed (by any sidecar) would draw that id and lose
  its message to the conflict. Message ids are checked and inserted under the lock every message insert
  holds (``messages.hold_id_order``), so no other writer draws a message id in between.
- ``Database.write`` runs a batch again after a serialisation failure or a deadlock, so what a batch learns
  (ids moved, sessions and turns this import created, the counts) is kept apart and merged into the
  import's state only once the batch has committed: a batch run twice counts once.
- A savepoint is a subtransaction here, not a cheap mark: a batch is written in one go under one savepoint,
  and only when a line fails is it undone and written again with a savepoint a line (about three times
  the throughput of a savepoint a line on a clean file).
- Another sidecar may commit the same message or turn while the import runs: the import then finds it
  present, as it would have found it stored before.
"""

from __future__ import annotations

import dataclasses
import time
from collections import ChainMap
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path

import psycopg

from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.transfer.lines import (
    CompactionLine,
    ForgottenLine,
    Line,
    LinkLine,
    MessageLine,
    SessionLine,
    SnapshotLine,
    TurnLine,
)
from openclaw_lossless.store.model.transfer.restore import (
    Outcome,
    RestoreReport,
    apply_line,
    count_outcome,
    message_record,
    moved_id,
    read_in_batches,
    remember_move,
    snapshot_name,
)
from openclaw_lossless.store.postgres import messages
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.forgetting import honour
from openclaw_lossless.store.postgres.sessions import ensure_session, find_session

# A line the checks let through but the server refuses costs that line (counted malformed), never the batch:
# a constraint, a value out of a column's range (a turn's ``integer`` message count), what a text cannot hold.
_LINE_ERRORS = (BadRequest, OverflowError, UnicodeEncodeError, psycopg.IntegrityError, psycopg.DataError)


def restore_jsonl(
    db: Database, path: Path, options: CaptureOptions, progress: Callable[[int], object] | None = None
) -> RestoreReport:
    """Bring records back from an export or archive file; a malformed line is counted and skipped."""
    restorer = Restorer(db)
    return read_in_batches(path, options, restorer.report, lambda batch: restorer.flush(batch, progress))


@dataclass
class Learned:
    """What an import has learned so far: sessions and turns it created whose own lines have not come yet
    (True; False once their line set them), and ids it had to move."""

    new_sessions: MutableMapping[str, bool] = dataclasses.field(default_factory=dict)
    new_turns: MutableMapping[int, bool] = dataclasses.field(default_factory=dict)
    moved_messages: MutableMapping[int, int] = dataclasses.field(default_factory=dict)
    moved_compactions: MutableMapping[int, int] = dataclasses.field(default_factory=dict)

    def layer(self) -> Learned:
        """A batch's view: it reads what the import learned and writes to fresh maps on top of it."""
        return Learned(*(ChainMap({}, getattr(self, f.name)) for f in dataclasses.fields(self)))

    def absorb(self, layer: Learned) -> None:
        """Keep what a committed batch learned."""
        for f in dataclasses.fields(self):
            added = getattr(layer, f.name)
            assert isinstance(added, ChainMap)
            getattr(self, f.name).update(added.maps[0])


@dataclass
class Restorer:
    """Applies parsed lines in file order, one transaction a batch, keeping what committed batches learned."""

    db: Database
    report: RestoreReport = dataclasses.field(default_factory=RestoreReport)
    learned: Learned = dataclasses.field(default_factory=Learned)

    def flush(self, batch: list[Line], progress: Callable[[int], object] | None) -> None:
        if not batch:
            return
        done = self.db.write(lambda conn: self._apply_all(conn, batch))
        self.learned.absorb(done.learned)
        for counter in dataclasses.fields(RestoreReport):
            name = counter.name
            setattr(self.report, name, getattr(self.report, name) + getattr(done.report, name))
        if progress:
            progress(len(batch))
        batch.clear()

    def _apply_all(self, conn: Connection, batch: list[Line]) -> BatchWriter:
        """Write the batch, first in one go; when a line fails, undo that and write it again with each line
        under its own savepoint, so the failing line costs only itself. Run afresh on each attempt of
        ``write``: a fresh layer over what committed, and counts from zero."""
        if any(isinstance(line, MessageLine) for line in batch):
            # Taken before any message id is chosen, outside every savepoint (rolling one back would release
            # it): no other writer draws a message id until this batch commits.
            messages.hold_id_order(conn)
        try:
            with conn.transaction():  # one savepoint: a clean file pays two statements a batch, not a line
                return self._write(conn, batch, guarded=False)
        except (*_LINE_ERRORS, _AlreadyStored):
            return self._write(conn, batch, guarded=True)

    def _write(self, conn: Connection, batch: list[Line], *, guarded: bool) -> BatchWriter:
        writer = BatchWriter(RestoreReport(), self.learned.layer(), guarded)
        for line in batch:
            writer.apply(conn, line)
        return writer


class _AlreadyStored(Exception):
    """Another writer stored this message while the import was writing it: the line's writes are undone."""

    def __init__(self, message_id: int) -> None:
        super().__init__(message_id)
        self.message_id = message_id


@dataclass
class BatchWriter:
    """One batch's writes, in one transaction."""

    report: RestoreReport
    learned: Learned
    guarded: bool  # each line under its own savepoint; else a failing line raises, undoing the batch
    # Sessions seen by lines that committed to their savepoint (a rolled-back line's new session is gone),
    # so a batch of one session's messages looks it up once, not twice a line.
    sessions: dict[str, SessionRef] = dataclasses.field(default_factory=dict)
    _line_sessions: dict[str, SessionRef] = dataclasses.field(default_factory=dict)

    def apply(self, conn: Connection, line: Line) -> None:
        self._line_sessions.clear()
        outcome = self._apply_guarded(conn, line) if self.guarded else apply_line(self, conn, line)
        if outcome is not None:  # a line rolled back created no session
            self.sessions.update(self._line_sessions)
        count_outcome(self.report, line, outcome)

    def _apply_guarded(self, conn: Connection, line: Line) -> Outcome | None:
        try:
            with conn.transaction():  # a savepoint
                return apply_line(self, conn, line)
        except _AlreadyStored as stored:
            assert isinstance(line, MessageLine)
            self._line_sessions.clear()  # rolled back with the line
            remember_move(self.learned.moved_messages, line.id, stored.message_id)
            return "present"
        except _LINE_ERRORS:
            return None

    def forgotten(self, conn: Connection, line: ForgottenLine) -> Outcome:
        new = honour(conn, line.session_id, line.content_hash, line.window_key, line.forgotten_at)
        return "new" if new else "present"

    def _session(self, conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
        known = self.sessions.get(session_id)
        if known is not None and (session_key is None or known.session_key is not None):
            return known  # nothing for ensure_session to fill in
        if find_session(conn, session_id) is None:
            session = ensure_session(conn, session_id, session_key)
            self.learned.new_sessions[session_id] = True
        else:
            session = ensure_session(conn, session_id, session_key)
        self._line_sessions[session_id] = session
        return session

    def message(self, conn: Connection, line: MessageLine) -> Outcome:
        cites, record = message_record(line, self.learned.moved_messages)
        session = self._session(conn, line.session_id, line.session_key)
        if messages.is_forgotten(conn, session.session_id, record.content_hash, record.window_key):
            return "forgotten"
        found = _stored_id(conn, session.rowid, record.content_hash)
        if found is not None:
            remember_move(self.learned.moved_messages, line.id, found)
            return "present"
        ident = messages.insert_row(
            conn,
            session,
            record,
            stored_at=time.time() if line.stored_at is None else line.stored_at,
            turn_rowid=self._turn(conn, line, session.rowid),
            message_id=_keep_id(conn, "messages", line.id),
            kind=line.kind,
            cites=cites,
        )
        if ident is None:  # committed by another sidecar since the check above (it waited for that commit)
            raise _AlreadyStored(_stored_id(conn, session.rowid, record.content_hash) or line.id)
        messages.restored(conn, session.rowid, record.content_hash)  # an archived one is back: its row is its identity
        messages.queue_for_embedding(conn, [ident])
        remember_move(self.learned.moved_messages, line.id, ident)
        return "new"

    def _turn(self, conn: Connection, line: MessageLine, session_rowid: int) -> int | None:
        """The turn row for the message's advancement key, counted as the SQLite ``Restorer._turn``
        counts it; a turn a sidecar commits meanwhile (the insert finds it taken) counts its own messages."""
        if line.advancement_key is None:
            return None
        found = _turn_id(conn, line.advancement_key)
        if found is None:
            row = conn.execute(
                "INSERT INTO turns (advancement_key, session_rowid, committed_at, message_count)"
                " VALUES (%s, %s, %s, 0) ON CONFLICT (advancement_key) DO NOTHING RETURNING id",
                (line.advancement_key, session_rowid, time.time() if line.stored_at is None else line.stored_at),
            ).fetchone()
            if row is None:  # a sidecar committed this turn meanwhile: it counts its own messages
                return _turn_id(conn, line.advancement_key)
            found = int(row[0])
            self.learned.new_turns[found] = True
        if self.learned.new_turns.get(found, False):
            conn.execute("UPDATE turns SET message_count = message_count + 1 WHERE id = %s", (found,))
        return found

    def session_line(self, conn: Connection, line: SessionLine) -> Outcome:
        self.sessions.pop(line.session_id, None)  # its key may be filled in below
        known = find_session(conn, line.session_id) is not None
        if known and not self.learned.new_sessions.get(line.session_id, False):
            ensure_session(conn, line.session_id, line.session_key)  # fills in a key the store lacked, as a hook does
            return "present"
        session = ensure_session(conn, line.session_id, line.session_key)
        conn.execute(
            "UPDATE sessions SET created_at = %s, last_seen_at = %s WHERE id = %s",
            (line.created_at, line.last_seen_at, session.rowid),
        )
        self.learned.new_sessions[line.session_id] = False
        return "new"

    def turn_line(self, conn: Connection, line: TurnLine) -> Outcome:
        found = _turn_id(conn, line.advancement_key)
        if found is not None and not self.learned.new_turns.get(found, False):
            return "present"
        session = self._session(conn, line.session_id, None)
        values = (session.rowid, line.committed_at, line.message_count, line.heartbeat)
        if found is None:
            row = conn.execute(
                "INSERT INTO turns (session_rowid, committed_at, message_count, heartbeat, advancement_key)"
                " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (advancement_key) DO NOTHING RETURNING id",
                (*values, line.advancement_key),
            ).fetchone()
            return "new" if row is not None else "present"  # present: a sidecar committed it meanwhile
        conn.execute(
            "UPDATE turns SET session_rowid = %s, committed_at = %s, message_count = %s, heartbeat = %s WHERE id = %s",
            (*values, found),
        )
        self.learned.new_turns[found] = False
        return "new"

    def compaction(self, conn: Connection, line: CompactionLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = moved_id(self.learned.moved_messages, line.last_message_id)
        found = conn.execute(
            "SELECT id FROM compactions WHERE session_rowid = %s AND recorded_at = %s"
            " AND last_message_id IS NOT DISTINCT FROM %s::bigint",
            (session.rowid, line.recorded_at, last),
        ).fetchone()
        if found is not None:
            remember_move(self.learned.moved_compactions, line.id, int(found[0]))
            return "present"
        wanted = _keep_id(conn, "compactions", line.id)
        row = conn.execute(
            "INSERT INTO compactions (id, session_rowid, recorded_at, tokens_before, tokens_after, compacted,"
            f" summary, reason, last_message_id, status) VALUES ({_id_slot(wanted)}, %s, %s, %s, %s, %s, %s, %s,"
            " %s, %s) RETURNING id",
            (
                *_id_param(wanted),
                session.rowid,
                line.recorded_at,
                line.tokens_before,
                line.tokens_after,
                line.compacted,
                _text(line.summary),
                _text(line.reason),
                last,
                line.status,
            ),
        ).fetchone()
        assert row is not None, "INSERT ... RETURNING returns its row"
        remember_move(self.learned.moved_compactions, line.id, int(row[0]))
        return "new"

    def snapshot(self, conn: Connection, line: SnapshotLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = moved_id(self.learned.moved_messages, line.last_message_id)
        compaction = self._compaction_id(conn, line.compaction_id)
        name = snapshot_name(line, compaction)
        found = conn.execute("SELECT session_rowid, last_message_id FROM snapshots WHERE name = %s", (name,)).fetchone()
        if found is not None:
            return "present" if tuple(found) == (session.rowid, last) else "conflict"
        wanted = _keep_id(conn, "snapshots", line.id)
        conn.execute(
            "INSERT INTO snapshots (id, name, session_rowid, last_message_id, created_at, automatic, compaction_id)"
            f" VALUES ({_id_slot(wanted)}, %s, %s, %s, %s, %s, %s)",
            (*_id_param(wanted), name, session.rowid, last, line.created_at, line.automatic, compaction),
        )
        return "new"

    def link(self, conn: Connection, line: LinkLine) -> Outcome:
        values = (line.parent_key, _text(line.context_mode), line.spawned_at, line.ended_at, _text(line.ended_reason))
        found = conn.execute(
            "SELECT parent_session_key, context_mode, spawned_at, ended_at, ended_reason FROM subagent_links"
            " WHERE child_session_key = %s",
            (line.child_key,),
        ).fetchone()
        if found is not None:
            return "present" if tuple(found) == values else "conflict"
        wanted = _keep_id(conn, "subagent_links", line.id)
        conn.execute(
            "INSERT INTO subagent_links (id, child_session_key, parent_session_key, context_mode, spawned_at,"
            f" ended_at, ended_reason) VALUES ({_id_slot(wanted)}, %s, %s, %s, %s, %s, %s)",
            (*_id_param(wanted), line.child_key, *values),
        )
        return "new"

    def _compaction_id(self, conn: Connection, exported: int | None) -> int | None:
        """The compaction a snapshot belongs to, or None when it is not in the store (the snapshot still names
        its point in the conversation)."""
        stored = moved_id(self.learned.moved_compactions, exported)
        if stored is None or conn.execute("SELECT 1 FROM compactions WHERE id = %s", (stored,)).fetchone() is None:
            return None
        return stored


def _stored_id(conn: Connection, session_rowid: int, content_hash: bytes) -> int | None:
    row = conn.execute(
        "SELECT id FROM messages WHERE session_rowid = %s AND content_hash = %s", (session_rowid, content_hash)
    ).fetchone()
    return None if row is None else int(row[0])


def _turn_id(conn: Connection, advancement_key: str) -> int | None:
    row = conn.execute("SELECT id FROM turns WHERE advancement_key = %s", (advancement_key,)).fetchone()
    return None if row is None else int(row[0])


def _keep_id(conn: Connection, table: str, wanted: int) -> int | None:
    """The exported id when no row has it, with the table's sequence moved past it so no later insert draws
    it; None (the sequence chooses) when it is taken."""
    row = conn.execute(
        "SELECT taken, CASE WHEN NOT taken AND %(id)s > coalesce(pg_sequence_last_value(seq), 0)"
        " THEN setval(seq, %(id)s) END FROM (SELECT pg_get_serial_sequence(%(table)s, 'id')::regclass AS seq,"
        f" EXISTS (SELECT 1 FROM {table} WHERE id = %(id)s) AS taken) q",
        {"id": wanted, "table": table},
    ).fetchone()
    return None if row is None or row[0] else wanted


def _text(text: str | None) -> str | None:
    """Free text as the live hooks store it here: NUL, which a PostgreSQL text cannot hold, as U+FFFD."""
    return None if text is None else messages.pg_text(text)


def _id_slot(wanted: int | None) -> str:
    return "DEFAULT" if wanted is None else "%s"


def _id_param(wanted: int | None) -> tuple[int, ...]:
    return () if wanted is None else (wanted,)
