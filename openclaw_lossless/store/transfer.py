"""Export and import of the store as JSONL: one message per line, then the records that point into them.

Message lines come first, one per line with the full original object and metadata, in id order; archives
(``archive.py``) write only those, so an archived slice comes back with ``import --jsonl``. After them come
lines with a ``type``: ``session``, ``turn``, ``compaction``, ``snapshot`` and ``subagentLink``, which
``recover --before-compaction``, ``snapshot show`` and a subagent's recall scope need. They follow the
messages so that a file cut short still holds every message it got to, and an importer that knows only
message lines counts them as malformed and goes on.

Import reads a file as untrusted input: each line is checked and its message captured as if committed over
HTTP (``capture/lines.py``) before any write. A malformed line is counted and skipped; only a file that
cannot be read stops the import.

Ids are kept when free, so exporting a store, importing the file into an empty store and exporting again
gives the same bytes. A record already present (a message with the same session and content, a session or
turn with the same name, a compaction of the same session at the same time, an identical snapshot or link)
is skipped, so importing twice changes nothing. When an id is taken, the record gets a new one and whatever
later in the file points at the old id (a compaction's or snapshot's last message, an outcome's citation, a
snapshot's compaction) is pointed at the new one.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

from openclaw_lossless.capture.lines import (
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
from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.connection import Connection, Database
from openclaw_lossless.store.forget import honour
from openclaw_lossless.store.messages import insert_row, is_forgotten, queue_for_embedding
from openclaw_lossless.store.sessions import SessionRef, ensure_session, find_session
from openclaw_lossless.store.subagents import outcome_identity

FORMAT = "openclaw-lossless/v1"
BATCH = 500
_SAVEPOINT = "import_record"

# -- export -------------------------------------------------------------------------------------------------


def export_records(conn: Connection, where: str = "1", params: tuple[Any, ...] = ()) -> Iterator[dict[str, Any]]:
    """Every message matching ``where`` (over ``m`` messages, ``s`` sessions), oldest first."""
    cursor = conn.execute(
        "SELECT m.id, s.session_id, s.session_key, m.agent_id, m.role, m.kind, m.created_at, m.stored_at,"
        " m.original, m.text, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites,"
        " t.advancement_key FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        f" LEFT JOIN turns t ON t.id = m.turn_rowid WHERE {where} ORDER BY m.id",
        params,
    )
    for row in cursor:
        yield {
            "format": FORMAT,
            "id": row[0],
            "sessionId": row[1],
            "sessionKey": row[2],
            "agentId": row[3],
            "role": row[4],
            "kind": row[5],
            "createdAt": row[6],
            "storedAt": row[7],
            "message": json.loads(row[8]),
            "text": row[9],
            "contentHash": bytes(row[10]).hex(),
            "windowKey": row[11],
            "tokens": row[12],
            "importance": row[13],
            "importanceLabel": row[14],
            "cites": row[15],
            "advancementKey": row[16],
        }


@dataclass(frozen=True)
class ExportScope:
    """What an export covers: the whole store, one agent's sessions, or one session."""

    agent: str | None = None
    session: str | None = None

    def messages(self) -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``m`` (messages) and ``s`` (sessions)."""
        clauses, params = ["1"], []
        if self.agent:
            clauses.append("m.agent_id = ?")
            params.append(self.agent)
        if self.session:
            clauses.append("s.session_id = ?")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)

    def sessions(self) -> tuple[str, tuple[Any, ...]]:
        """A WHERE fragment over ``s``: a session is the agent's if it is now, or if it has the agent's messages."""
        clauses, params = ["1"], []
        if self.agent:
            clauses.append("(s.agent_id = ? OR s.id IN (SELECT session_rowid FROM messages WHERE agent_id = ?))")
            params += [self.agent, self.agent]
        if self.session:
            clauses.append("s.session_id = ?")
            params.append(self.session)
        return " AND ".join(clauses), tuple(params)


def check_scope(conn: Connection, scope: ExportScope) -> None:
    """Refuse a scope naming no stored session: an empty export of a typo would look like a success."""
    if not scope.agent and not scope.session:
        return
    where, params = scope.sessions()
    if conn.execute(f"SELECT 1 FROM sessions s WHERE {where} LIMIT 1", params).fetchone() is not None:
        return
    session, agent = repr((scope.session or "")[:80]), repr((scope.agent or "")[:80])
    if scope.agent and scope.session:
        raise BadRequest(f"no session {session} of agent {agent} is stored: nothing to export")
    if scope.session:
        raise BadRequest(f"no session {session} is stored: nothing to export")
    raise BadRequest(f"no session of agent {agent} is stored: nothing to export")


def export_store(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's messages, then its sessions, turns, compactions, snapshots and subagent links.

    Read in one transaction, so a sidecar writing meanwhile cannot leave a snapshot pointing past the
    messages exported.
    """
    conn.execute("BEGIN")
    try:
        where, params = scope.messages()
        yield from export_records(conn, where, params)
        yield from _typed_records(conn, scope)
    finally:
        conn.execute("COMMIT")


# Per table: the type of its lines, its rows (joined to ``s``, the sessions in scope), their order, and the
# column of each field. Sessions and turns are ordered by what they carry, not by row ids an import does not
# keep, so a store exported, imported and exported again gives the same bytes.
_TABLES: tuple[tuple[str, str, str, dict[str, str]], ...] = (
    ("session", "sessions s", "s.created_at, s.session_id",
     {"sessionId": "s.session_id", "sessionKey": "s.session_key", "agentId": "s.agent_id",
      "createdAt": "s.created_at", "lastSeenAt": "s.last_seen_at"}),
    ("turn", "turns x JOIN sessions s ON s.id = x.session_rowid", "x.committed_at, x.advancement_key",
     {"advancementKey": "x.advancement_key", "sessionId": "s.session_id", "committedAt": "x.committed_at",
      "messageCount": "x.message_count", "heartbeat": "x.heartbeat"}),
    ("compaction", "compactions x JOIN sessions s ON s.id = x.session_rowid", "x.id",
     {"id": "x.id", "sessionId": "s.session_id", "recordedAt": "x.recorded_at", "tokensBefore": "x.tokens_before",
      "tokensAfter": "x.tokens_after", "compacted": "x.compacted", "summary": "x.summary", "reason": "x.reason",
      "lastMessageId": "x.last_message_id", "status": "x.status"}),
    ("snapshot", "snapshots x JOIN sessions s ON s.id = x.session_rowid", "x.id",
     {"id": "x.id", "name": "x.name", "sessionId": "s.session_id", "lastMessageId": "x.last_message_id",
      "createdAt": "x.created_at", "automatic": "x.automatic", "compactionId": "x.compaction_id"}),
)  # fmt: skip
_LINK_FIELDS = {"id": "id", "parentSessionKey": "parent_session_key", "childSessionKey": "child_session_key",
                "contextMode": "context_mode", "spawnedAt": "spawned_at", "endedAt": "ended_at",
                "endedReason": "ended_reason"}  # fmt: skip
_FLAGS = frozenset({"heartbeat", "compacted", "automatic"})  # 0/1 columns, true/false in the file


def _typed_records(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's sessions, turns, compactions and snapshots, then the subagent links touching its sessions."""
    where, params = scope.sessions()
    for kind, source, order, fields in _TABLES:
        sql = f"SELECT {', '.join(fields.values())} FROM {source} WHERE {where} ORDER BY {order}"
        yield from _rows(conn.execute(sql, params), kind, tuple(fields))
    links, link_params = "1", ()
    if scope.agent or scope.session:  # the whole store's links include those to sessions never stored
        keys = f"SELECT s.session_key FROM sessions s WHERE {where}"
        links, link_params = f"child_session_key IN ({keys}) OR parent_session_key IN ({keys})", params * 2
    sql = f"SELECT {', '.join(_LINK_FIELDS.values())} FROM subagent_links WHERE {links} ORDER BY id"
    yield from _rows(conn.execute(sql, link_params), "subagentLink", tuple(_LINK_FIELDS))
    yield from _tombstones(conn, scope)


def _tombstones(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's forgotten messages (identity only), so an import of this file keeps them forgotten."""
    where, params = scope.sessions()
    rows = conn.execute(
        "SELECT f.session_id, f.content_hash, f.window_key, f.forgotten_at FROM forgotten f"
        f" LEFT JOIN sessions s ON s.session_id = f.session_id WHERE {where} ORDER BY f.id",
        params,
    )
    for session_id, digest, window_key, at in rows:
        yield {"format": FORMAT, "type": "forgotten", "sessionId": session_id, "contentHash": bytes(digest).hex(),
               "windowKey": window_key, "forgottenAt": at}  # fmt: skip


def _rows(cursor: Iterable[tuple[Any, ...]], kind: str, names: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    for row in cursor:
        values = {name: bool(value) if name in _FLAGS else value for name, value in zip(names, row, strict=True)}
        yield {"format": FORMAT, "type": kind, **values}


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> Counter[str]:
    """Write the records; returns how many of each type (``message`` for message lines)."""
    counts: Counter[str] = Counter()
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        counts[str(record.get("type", "message"))] += 1
    return counts


# -- importing ----------------------------------------------------------------------------------------------

Outcome = Literal["new", "present", "conflict", "forgotten"]
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
class ImportReport:
    """Lines read; rows each kind of line added; lines already in the store, in conflict, or malformed."""

    read: int = 0
    imported: int = 0  # messages
    sessions: int = 0
    turns: int = 0
    compactions: int = 0
    snapshots: int = 0
    subagent_links: int = 0
    tombstones: int = 0  # forgotten messages' identities the file carried and the store did not hold yet
    forgotten: int = 0  # message lines not imported: they were forgotten (``store/forget.py``)
    already_present: int = 0
    conflicts: int = 0  # a snapshot name or a child's link the store holds with other content: the store's kept
    malformed: int = 0


class Unreadable(BadRequest):
    """The file cannot be opened, or stops being readable part way (a truncated or damaged gzip)."""


def import_jsonl(
    db: Database, path: Path, options: CaptureOptions, progress: Callable[[int], object] | None = None
) -> ImportReport:
    """Bring records back from an export or archive file; a malformed line is counted and skipped."""
    if not path.is_file():
        raise BadRequest(f"no such file: {path}")
    importer = Importer(db, ImportReport())
    batch: list[Line] = []
    try:
        for raw in _read(path):
            if not raw.strip():
                continue
            importer.report.read += 1
            line = parse_line(raw, options)
            if line is None:
                importer.report.malformed += 1
                continue
            batch.append(line)
            if len(batch) >= BATCH:
                importer.flush(batch, progress)
    except Unreadable as exc:
        importer.flush(batch, progress)
        raise Unreadable(f"{exc.message}; the {importer.report.read} lines before it were imported") from exc
    importer.flush(batch, progress)
    return importer.report


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
class Importer:
    """Applies parsed lines in file order, remembering what this import created and which ids moved.

    Sessions and turns a message line creates carry placeholder times until their own lines (which follow the
    messages) set the exported ones; rows that were in the store before the import are never changed.
    """

    db: Database
    report: ImportReport
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
                outcome: Outcome | None = self._apply(conn, line)
            except (BadRequest, OverflowError, UnicodeEncodeError, self.db.module.IntegrityError):
                conn.execute(f"ROLLBACK TO {_SAVEPOINT}")
                outcome = None
            conn.execute(f"RELEASE {_SAVEPOINT}")
            self._count(line, outcome)

    def _count(self, line: Line, outcome: Outcome | None) -> None:
        if outcome is None:
            self.report.malformed += 1
        elif outcome == "present":
            self.report.already_present += 1
        elif outcome == "conflict":
            self.report.conflicts += 1
        elif outcome == "forgotten":
            self.report.forgotten += 1
        else:
            name = _COUNTER[type(line)]
            setattr(self.report, name, getattr(self.report, name) + 1)

    def _apply(self, conn: Connection, line: Line) -> Outcome:
        if isinstance(line, MessageLine):
            return self._message(conn, line)
        if isinstance(line, SessionLine):
            return self._session_line(conn, line)
        if isinstance(line, TurnLine):
            return self._turn_line(conn, line)
        if isinstance(line, CompactionLine):
            return self._compaction(conn, line)
        if isinstance(line, SnapshotLine):
            return self._snapshot(conn, line)
        if isinstance(line, ForgottenLine):
            new = honour(conn, line.session_id, line.content_hash, line.window_key, line.forgotten_at)
            return "new" if new else "present"
        return self._link(conn, line)

    def _session(self, conn: Connection, session_id: str, session_key: str | None) -> SessionRef:
        if find_session(conn, session_id) is None:
            session = ensure_session(conn, session_id, session_key)
            self.new_sessions.add(session_id)
            return session
        return ensure_session(conn, session_id, session_key)

    def _message(self, conn: Connection, line: MessageLine) -> Outcome:
        cites = None if line.cites is None else self.moved_messages.get(line.cites, line.cites)
        record = line.record
        if line.child_key is not None and cites is not None:  # an outcome names its cited message's new id
            original, digest = outcome_identity(line.child_key, cites)
            record = dataclasses.replace(record, original=original, content_hash=digest)
        session = self._session(conn, line.session_id, line.session_key)
        if is_forgotten(conn, session.session_id, record.content_hash, record.window_key):
            return "forgotten"
        found = conn.execute(
            "SELECT id FROM messages WHERE session_rowid = ? AND content_hash = ?", (session.rowid, record.content_hash)
        ).fetchone()
        if found is not None:
            self._moved(self.moved_messages, line.id, int(found[0]))
            return "present"
        free = conn.execute("SELECT 1 FROM messages WHERE id = ?", (line.id,)).fetchone() is None
        turn_rowid = self._turn(conn, line, session.rowid)
        ident = insert_row(
            conn,
            session,
            record,
            stored_at=time.time() if line.stored_at is None else line.stored_at,
            turn_rowid=turn_rowid,
            message_id=line.id if free else None,
            kind=line.kind,
            cites=cites,
        )
        assert ident is not None, "checked above: the session holds no message of this identity"
        queue_for_embedding(conn, [ident])
        self._moved(self.moved_messages, line.id, ident)
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

    def _session_line(self, conn: Connection, line: SessionLine) -> Outcome:
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

    def _turn_line(self, conn: Connection, line: TurnLine) -> Outcome:
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

    def _compaction(self, conn: Connection, line: CompactionLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = self._message_id(line.last_message_id)
        found = conn.execute(
            "SELECT id FROM compactions WHERE session_rowid = ? AND recorded_at = ? AND last_message_id IS ?",
            (session.rowid, line.recorded_at, last),
        ).fetchone()
        if found is not None:
            self._moved(self.moved_compactions, line.id, int(found[0]))
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
        self._moved(self.moved_compactions, line.id, int(cursor.lastrowid))
        return "new"

    def _snapshot(self, conn: Connection, line: SnapshotLine) -> Outcome:
        session = self._session(conn, line.session_id, None)
        last = self._message_id(line.last_message_id)
        compaction = self._compaction_id(conn, line.compaction_id)
        name = line.name
        if (
            line.automatic
            and compaction not in (None, line.compaction_id)
            and name == f"pre-compaction-{line.compaction_id}"
        ):
            name = f"pre-compaction-{compaction}"  # the automatic name follows its compaction's new id
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

    def _link(self, conn: Connection, line: LinkLine) -> Outcome:
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

    def _message_id(self, exported: int | None) -> int | None:
        return None if exported is None else self.moved_messages.get(exported, exported)

    def _compaction_id(self, conn: Connection, exported: int | None) -> int | None:
        """The compaction a snapshot belongs to, or None when it is not in the store (the snapshot still names
        its point in the conversation)."""
        stored = None if exported is None else self.moved_compactions.get(exported, exported)
        if stored is None or conn.execute("SELECT 1 FROM compactions WHERE id = ?", (stored,)).fetchone() is None:
            return None
        return stored

    @staticmethod
    def _free_id(conn: Connection, table: str, wanted: int) -> int | None:
        """The exported id when no row has it (None lets SQLite choose)."""
        taken = conn.execute(f"SELECT 1 FROM {table} WHERE id = ?", (wanted,)).fetchone()
        return None if taken else wanted

    @staticmethod
    def _moved(moved: dict[int, int], exported: int, stored: int) -> None:
        """Remember only ids that changed: importing into an empty store remembers nothing."""
        if exported != stored:
            moved[exported] = stored
