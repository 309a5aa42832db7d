"""Restore (``import --jsonl``): the lines of an export or archive file, checked and captured, written into the store.

A file is untrusted input: every line is parsed and captured (``store/model/transfer/lines.py``) before any
write, and each line is applied under a savepoint, so a line the checks missed costs that line, never the batch.
Ids are kept when free and remapped when taken (see this package's docstring).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

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
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.forgetting import honour
from openclaw_lossless.store.sqlite.messages import (
    id_above_removed,
    insert_row,
    is_forgotten,
    queue_for_embedding,
    restored,
)
from openclaw_lossless.store.sqlite.sessions import ensure_session, find_session

_SAVEPOINT = "import_record"


def restore_jsonl(
    db: Database, path: Path, options: CaptureOptions, progress: Callable[[int], object] | None = None
) -> RestoreReport:
    """Bring records back from an export or archive file; a malformed line is counted and skipped."""
    restorer = Restorer(db, RestoreReport())
    return read_in_batches(path, options, restorer.report, lambda batch: restorer.flush(batch, progress))


@dataclass
class Restorer:
    """Applies parsed lines in file order, remembering what this import created and which ids moved.

    Sessions and turns a message line creates carry placeholder times until their own lines (which follow the
    messages) set the exported ones; rows that were in the store before the import are never changed.
    """

    db: Database
    report: RestoreReport
    new_sessions: set[str] = field(default_factory=set)
    new_turns: set[int] = field(default_factory=set)
    moved_messages: dict[int, int] = field(default_factory=dict)
    moved_compactions: dict[int, int] = field(default_factory=dict)

    def flush(self, batch: list[Line], progress: Callable[[int], object] | None) -> None:
        if not batch:
            return
        self.db.write(lambda conn: self._apply_all(conn, batch))
        if progress:
            progress(len(batch))
        batch.clear()

    def _apply_all(self, conn: Connection, batch: list[Line]) -> None:
        for line in batch:
            # Each line was checked before the transaction; the savepoint is a last guard, so a line the checks
            # missed costs that line, never the batch. A line rolled back leaves ids moved unrecorded (they are
            # recorded after the insert), at most a session or turn noted as this import's own, which it still is.
            conn.execute(f"SAVEPOINT {_SAVEPOINT}")
            try:
                outcome: Outcome | None = apply_line(self, conn, line)
            except (BadRequest, OverflowError, UnicodeEncodeError, self.db.module.IntegrityError):
                conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
                outcome = None
            conn.execute(f"RELEASE {_SAVEPOINT}")
            count_outcome(self.report, line, outcome)

    def forgotten(self, conn: Connection, line: ForgottenLine) -> Outcome:
        new = honour(conn, line.session_id, line.content_hash, line.window_key, line.forgotten_at)
        return "new" if new else "present"

    def _session(self, conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
        if find_session(conn, session_id) is None:
            session = ensure_session(conn, session_id, session_key)
            self.new_sessions.add(session_id)
            return session
        return ensure_session(conn, session_id, session_key)

    def message(self, conn: Connection, line: MessageLine) -> Outcome:
        cites, record = message_record(line, self.moved_messages)
        session = self._session(conn, line.session_id, line.session_key)
        if is_forgotten(conn, session.session_id, record.content_hash, record.window_key):
            return "forgotten"
        found = conn.execute(
            "SELECT id FROM messages WHERE session_rowid = ? AND content_hash = ?", (session.rowid, record.content_hash)
        ).fetchone()
        if found is not None:
            remember_move(self.moved_messages, line.id, int(found[0]))
            return "present"
        free = conn.execute("SELECT 1 FROM messages WHERE id = ?", (line.id,)).fetchone() is None
        turn_rowid = self._turn(conn, line, session.rowid)
        ident = insert_row(
            conn,
            session,
            record,
            stored_at=time.time() if line.stored_at is None else line.stored_at,
            turn_rowid=turn_rowid,
            message_id=line.id if free else id_above_removed(conn),
            kind=line.kind,
            cites=cites,
        )
        assert ident is not None, "checked above: the session holds no message of this identity"
        restored(conn, session.rowid, record.content_hash)  # an archived one is back: its row is its identity
        queue_for_embedding(conn, [ident])
        remember_move(self.moved_messages, line.id, ident)
        return "new"

    def _turn(self, conn: Connection, line: MessageLine, session_rowid: int) -> int | None:
        """The turn row for the message's advancement key, so a replay of that turn is still a duplicate.

        A turn that was in the store before this import already counts its messages; one this import created
        from message lines counts them as they come (its own line, if the file has one, sets the exact count).
        """
        if line.advancement_key is None:
            return None
        row = conn.execute("SELECT id FROM turns WHERE advancement_key = ?", (line.advancement_key,)).fetchone()
        if row is not None:
            if int(row[0]) in self.new_turns:
                conn.execute("UPDATE turns SET message_count = message_count + 1 WHERE id = ?", (row[0],))
            return int(row[0])
        cursor = conn.execute(
            "INSERT INTO turns (advancement_key, session_rowid, committed_at, message_count) VALUES (?, ?, ?, 1)",
            (line.advancement_key, session_rowid, time.time() if line.stored_at is None else line.stored_at),
        )
        self.new_turns.add(int(cursor.lastrowid))
        return int(cursor.lastrowid)

    def session_line(self, conn: Connection, line: SessionLine) -> Outcome:
        known = find_session(conn, line.session_id) is not None
        if known and line.session_id not in self.new_sessions:
            ensure_session(conn, line.session_id, line.session_key)  # fills in a key the store lacked, as a hook does
            return "present"
        session = ensure_session(conn, line.session_id, line.session_key)
        conn.execute(
            "UPDATE sessions SET created_at = ?, last_seen_at = ? WHERE id = ?",
            (line.created_at, line.last_seen_at, session.rowid),
        )
        self.new_sessions.discard(line.session_id)
        return "new"

    def turn_line(self, conn: Connection, line: TurnLine) -> Outcome:
        row = conn.execute("SELECT id FROM turns WHERE advancement_key = ?", (line.advancement_key,)).fetchone()
        if row is not None and int(row[0]) not in self.new_turns:
            return "present"
        session = self._session(conn, line.session_id, None)
        values = (session.rowid, line.committed_at, line.message_count, int(line.heartbeat))
        if row is None:
            conn.execute(
                "INSERT INTO turns (session_rowid, committed_at, message_count, heartbeat, advancement_key)"
                " VALUES (?, ?, ?, ?, ?)",
                (*values, line.advancement_key),
            )
        else:
            conn.execute(
                "UPDATE turns SET session_rowid = ?, committed_at = ?, message_count = ?, heartbeat = ? WHERE id = ?",
                (*values, row[0]),
            )
            self.new_turns.discard(int(row[0]))
        return "new"

    def compaction(self, conn: Connection, line: CompactionLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = moved_id(self.moved_messages, line.last_message_id)
        found = conn.execute(
            "SELECT id FROM compactions WHERE session_rowid = ? AND recorded_at = ? AND last_message_id IS ?",
            (session.rowid, line.recorded_at, last),
        ).fetchone()
        if found is not None:
            remember_move(self.moved_compactions, line.id, int(found[0]))
            return "present"
        cursor = conn.execute(
            "INSERT INTO compactions (id, session_rowid, recorded_at, tokens_before, tokens_after, compacted, summary,"
            " reason, last_message_id, status) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self._free_id(conn, "compactions", line.id),
                session.rowid,
                line.recorded_at,
                line.tokens_before,
                line.tokens_after,
                int(line.compacted),
                line.summary,
                line.reason,
                last,
                line.status,
            ),
        )
        remember_move(self.moved_compactions, line.id, int(cursor.lastrowid))
        return "new"

    def snapshot(self, conn: Connection, line: SnapshotLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = moved_id(self.moved_messages, line.last_message_id)
        compaction = self._compaction_id(conn, line.compaction_id)
        name = snapshot_name(line, compaction)
        found = conn.execute("SELECT session_rowid, last_message_id FROM snapshots WHERE name = ?", (name,)).fetchone()
        if found is not None:
            return "present" if tuple(found) == (session.rowid, last) else "conflict"
        conn.execute(
            "INSERT INTO snapshots (id, name, session_rowid, last_message_id, created_at, automatic, compaction_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                self._free_id(conn, "snapshots", line.id),
                name,
                session.rowid,
                last,
                line.created_at,
                int(line.automatic),
                compaction,
            ),
        )
        return "new"

    def link(self, conn: Connection, line: LinkLine) -> Outcome:
        values = (line.parent_key, line.context_mode, line.spawned_at, line.ended_at, line.ended_reason)
        found = conn.execute(
            "SELECT parent_session_key, context_mode, spawned_at, ended_at, ended_reason FROM subagent_links"
            " WHERE child_session_key = ?",
            (line.child_key,),
        ).fetchone()
        if found is not None:
            return "present" if tuple(found) == values else "conflict"
        conn.execute(
            "INSERT INTO subagent_links (id, child_session_key, parent_session_key, context_mode, spawned_at,"
            " ended_at, ended_reason) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (self._free_id(conn, "subagent_links", line.id), line.child_key, *values),
        )
        return "new"

    def _compaction_id(self, conn: Connection, exported: int | None) -> int | None:
        """The compaction a snapshot belongs to, or None when it is not in the store (the snapshot still names
        its point in the conversation)."""
        stored = moved_id(self.moved_compactions, exported)
        if stored is None or conn.execute("SELECT 1 FROM compactions WHERE id = ?", (stored,)).fetchone() is None:
            return None
        return stored

    @staticmethod
    def _free_id(conn: Connection, table: str, wanted: int) -> int | None:
        """The exported id when no row has it (None lets SQLite choose)."""
        taken = conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (wanted,)).fetchone()
        return None if taken else wanted
