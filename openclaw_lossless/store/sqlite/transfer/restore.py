"""Restore (``import --jsonl``): the lines of an export or archive file, checked and captured, written into the store.

A file is untrusted input: every line is parsed and captured (``lines.py``) before any write, and each line
is applied under a savepoint, so a line the checks missed costs that line, never the batch. Ids are kept when
free and remapped when taken (see this package's docstring).
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.forgetting import honour
from openclaw_lossless.store.sqlite.messages import (
    id_above_removed,
    insert_row,
    is_forgotten,
    queue_for_embedding,
    restored,
)
from openclaw_lossless.store.sqlite.sessions import SessionRef, ensure_session, find_session
from openclaw_lossless.store.sqlite.subagents import outcome_identity
from openclaw_lossless.store.sqlite.transfer.lines import (
    CompactionLine,
    ForgottenLine,
    Line,
    LinkLine,
    MessageLine,
    SessionLine,
    SnapshotLine,
    TurnLine,
    parse_line,
)

BATCH = 500
_SAVEPOINT = "import_record"

Outcome = Literal["new", "present", "conflict", "forgotten"]
ConnT = TypeVar("ConnT")
ConnT_contra = TypeVar("ConnT_contra", contravariant=True)
_COUNTER = {
    MessageLine: "imported",
    SessionLine: "sessions",
    TurnLine: "turns",
    CompactionLine: "compactions",
    SnapshotLine: "snapshots",
    LinkLine: "subagent_links",
    ForgottenLine: "tombstones",
}


@dataclass
class RestoreReport:
    """Lines read; rows each kind of line added; lines already in the store, in conflict, or malformed."""

    read: int = 0
    imported: int = 0  # messages
    sessions: int = 0
    turns: int = 0
    compactions: int = 0
    snapshots: int = 0
    subagent_links: int = 0
    tombstones: int = 0  # forgotten messages' identities the file carried and the store did not hold yet
    forgotten: int = 0  # message lines not imported: they were forgotten (``store/sqlite/forgetting.py``)
    already_present: int = 0
    conflicts: int = 0  # a snapshot name or a child's link the store holds with other content: the store's kept
    malformed: int = 0


class Unreadable(BadRequest):
    """The file cannot be opened, or stops being readable part way (a truncated or damaged gzip)."""


def restore_jsonl(
    db: Database, path: Path, options: CaptureOptions, progress: Callable[[int], object] | None = None
) -> RestoreReport:
    """Bring records back from an export or archive file; a malformed line is counted and skipped."""
    restorer = Restorer(db, RestoreReport())
    return read_in_batches(path, options, restorer.report, lambda batch: restorer.flush(batch, progress))


def read_in_batches(
    path: Path, options: CaptureOptions, report: RestoreReport, flush: Callable[[list[Line]], object]
) -> RestoreReport:
    """Read, check and parse the file, handing each full batch to ``flush`` (which writes and clears it).

    Both backends import through this loop and supply only ``flush``, their transaction, so what counts as
    read or malformed, the batch size, and what a damaged file keeps (the lines before the damage) are one
    rule: an import on either store of the same file reports the same counts.
    """
    if not path.is_file():
        raise BadRequest(f"no such file: {path}")
    batch: list[Line] = []
    try:
        for line in _checked(path, options, report):
            batch.append(line)
            if len(batch) >= BATCH:
                flush(batch)
    except Unreadable as exc:
        flush(batch)  # the lines read before the damage are imported
        raise Unreadable(f"{exc.message}; the {report.read} lines before it were imported") from exc
    flush(batch)
    return report


def _checked(path: Path, options: CaptureOptions, report: RestoreReport) -> Iterator[Line]:
    """The file's lines, parsed and captured; blank lines skipped, malformed ones counted."""
    for raw in _read(path):
        if raw.strip():
            report.read += 1
            line = parse_line(raw, options)
            if line is None:
                report.malformed += 1
            else:
                yield line


def _read(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes (decoded one by one, so one bad byte costs one line, not the import)."""
    try:
        handle = _open(path)
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            yield from handle
        except (OSError, EOFError, zlib.error) as exc:  # gzip: not gzip, truncated, or a damaged block
            raise Unreadable(f"cannot read {path} past its first lines: {exc}") from exc


def _open(path: Path) -> io.BufferedIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")


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


# What follows is the restore's logic apart from SQL, which the PostgreSQL restore
# (``store/postgres/transfer/restore.py``) applies too, so a file means the same on either store.


class LineWriter(Protocol[ConnT_contra]):
    """What a restore does with each kind of line, on its backend's connection (see ``apply_line``)."""

    def message(self, conn: ConnT_contra, line: MessageLine) -> Outcome: ...
    def session_line(self, conn: ConnT_contra, line: SessionLine) -> Outcome: ...
    def turn_line(self, conn: ConnT_contra, line: TurnLine) -> Outcome: ...
    def compaction(self, conn: ConnT_contra, line: CompactionLine) -> Outcome: ...
    def snapshot(self, conn: ConnT_contra, line: SnapshotLine) -> Outcome: ...
    def forgotten(self, conn: ConnT_contra, line: ForgottenLine) -> Outcome: ...
    def link(self, conn: ConnT_contra, line: LinkLine) -> Outcome: ...


def apply_line(writer: LineWriter[ConnT], conn: ConnT, line: Line) -> Outcome:
    """Hand the line to the writer's method for its kind: one routing for both backends' importers, so a kind
    of line added to ``lines.py`` is a type error in each until both write it."""
    if isinstance(line, MessageLine):
        return writer.message(conn, line)
    if isinstance(line, SessionLine):
        return writer.session_line(conn, line)
    if isinstance(line, TurnLine):
        return writer.turn_line(conn, line)
    if isinstance(line, CompactionLine):
        return writer.compaction(conn, line)
    if isinstance(line, SnapshotLine):
        return writer.snapshot(conn, line)
    if isinstance(line, ForgottenLine):
        return writer.forgotten(conn, line)
    return writer.link(conn, line)


_OUTCOME_COUNTER = {None: "malformed", "present": "already_present", "conflict": "conflicts", "forgotten": "forgotten"}


def count_outcome(report: RestoreReport, line: Line, outcome: Outcome | None) -> None:
    """Count a line's outcome (None: refused by the store) in the report; "new" counts by the line's kind.

    Shared by both backends so their reports for one file agree field by field."""
    counter = _OUTCOME_COUNTER.get(outcome, _COUNTER[type(line)])
    setattr(report, counter, getattr(report, counter) + 1)


def moved_id(moved: Mapping[int, int], exported: int | None) -> int | None:
    """The id an exported message or compaction has in this store: its new id if the import moved it."""
    return None if exported is None else moved.get(exported, exported)


def remember_move(moved: MutableMapping[int, int], exported: int, stored: int) -> None:
    """Remember only ids that changed: importing into an empty store remembers nothing."""
    if exported != stored:
        moved[exported] = stored


def message_record(line: MessageLine, moved_messages: Mapping[int, int]) -> tuple[int | None, MessageRecord]:
    """The message's cited id in this store and the record to store.

    A subagent's outcome names the message it cites, so its identity (``outcome_identity``) follows that
    message's new id when the import moved it; both backends store the same record for the same line."""
    cites = moved_id(moved_messages, line.cites)
    record = line.record
    if line.child_key is not None and cites is not None:  # an outcome names its cited message's new id
        original, digest = outcome_identity(line.child_key, cites)
        record = dataclasses.replace(record, original=original, content_hash=digest)
    return cites, record


def snapshot_name(line: SnapshotLine, compaction: int | None) -> str:
    """The snapshot's name in this store: an automatic one follows its compaction's new id (``compaction``, the
    id in this store or None when absent), so both backends name a moved compaction's snapshot alike."""
    if (
        line.automatic
        and compaction not in (None, line.compaction_id)
        and line.name == f"pre-compaction-{line.compaction_id}"
    ):
        return f"pre-compaction-{compaction}"
    return line.name
