"""Messages and turns: the append-only heart of the store.

A committed turn is one transaction: its advancement key and every message it carries, each queued in
``embedding_backlog`` for the background worker. No embedding happens here; a message is durable (and
keyword-searchable) the moment its turn commits.

A message's identity within a session (``UNIQUE (session_rowid, content_hash)``) is its content hash, so
re-sending the same message stores it once; a message of a durable turn that carries no timestamp is
identified by the turn's key and its place in the turn instead (``turn_identities`` says why).

A message's id is its citation (``msg:N``) and is never given twice. SQLite gives a new row the highest id in
the table plus one, so once the newest messages are forgotten (or archived) the next one would take a
forgotten one's citation, and a summary or a note that cites it would point at other words: the highest id
given is then kept in ``meta`` (``keep_ids_given``), and the next message is given the one above it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.store.model.messages import (
    Around,
    CommitStatus,
    MessageView,
    Neighbour,
    StoredMessage,
    around_of,
    dated_copy,
    is_turn_identified,
    message_values,
    message_view,
    neighbours_in_scope,
    stored_message,
    turn_identified_copy,
)
from openclaw_lossless.store.model.sessions import Scope, SessionRef
from openclaw_lossless.store.sqlite import message_days, meta
from openclaw_lossless.store.sqlite.connection import Connection

_COLUMNS = (
    "m.id, m.role, m.kind, m.created_at, m.text, m.session_rowid, m.agent_id, m.cites, m.importance, m.window_key"
)


IDS_GIVEN = "message_ids_given"  # meta: the highest message id given, while the newest ones are deleted


def insert_records(
    conn: Connection, session: SessionRef, records: Iterable[MessageRecord], *, turn_rowid: int | None = None
) -> list[int]:
    """Insert the records not already stored in this session, nor archived from it; returns the ids of the new
    ones."""
    now = time.time()
    free = id_above_removed(conn)  # None unless the newest messages were deleted since the last was stored
    new_ids: list[int] = []
    batch = list(records)
    moved = archived_of(conn, session.rowid, [record.content_hash for record in batch])
    for record in batch:
        if record.content_hash in moved:
            continue
        ident = insert_row(conn, session, record, turn_rowid=turn_rowid, stored_at=now, message_id=free)
        if ident is not None:
            new_ids.append(ident)
            free = None  # stored above every id given: SQLite's max + 1 is safe for the rest
    queue_for_embedding(conn, new_ids)
    return new_ids


def insert_row(
    conn: Connection,
    session: SessionRef,
    record: MessageRecord,
    *,
    stored_at: float,
    turn_rowid: int | None = None,
    message_id: int | None = None,
    kind: str = "message",
    cites: int | None = None,
) -> int | None:
    """Insert one message unless its session already holds one of that identity; its id, or None then.

    ``message_id``, ``kind`` and ``cites`` are for the import, which keeps what the export recorded, and
    ``message_id`` also for an id above the deleted newest ones (``id_above_removed``).
    A forgotten message (``store/sqlite/forgetting.py``) is never stored again, whichever way it comes back.
    """
    if is_forgotten(conn, session.session_id, record.content_hash, record.window_key):
        return None
    cursor = conn.execute(
        "INSERT OR IGNORE INTO messages (id, session_rowid, agent_id, turn_rowid, role, kind, created_at, stored_at,"
        " text, original, content_hash, window_key, tokens, importance, importance_label, cites, grams)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            message_id,
            *message_values(session, record, record.text, stored_at, turn_rowid, kind, cites),
            gram_text(record.text),
        ),
    )
    if not cursor.rowcount:
        return None
    message_id = int(cursor.lastrowid)
    message_days.index(conn, message_id, record.role, record.text, record.created_at)
    return message_id


def keep_ids_given(conn: Connection, deleting: Sequence[int]) -> None:
    """Called before messages are deleted (forgotten, archived): when the newest is among them, remember the
    highest id given, so that ``insert_row`` never gives it again."""
    if not deleting:
        return
    top = _newest_id(conn)
    if top and max(deleting) >= top:  # else a newer message stays: SQLite's max + 1 is above every id given
        _remember_given(conn, top)


def id_above_removed(conn: Connection) -> int | None:
    """In a write: the id for the next message when the newest were deleted since the last one was stored,
    else None (and the key, no longer needed, is dropped), so a turn pays one primary-key read of ``meta``."""
    given = meta.get(conn, IDS_GIVEN)
    if given is None:
        return None
    if int(given) >= _newest_id(conn):
        return int(given) + 1
    meta.remove(conn, IDS_GIVEN)  # a newer message is stored: SQLite's max + 1 is above every id given again
    return None


def highest_id_given(conn: Connection) -> int:
    """The highest message id this store has given, stored or not (forgotten, archived): a copy's target
    must give none of them again (``give_ids_above``)."""
    return max(_newest_id(conn), int(meta.get(conn, IDS_GIVEN) or 0))


def give_ids_above(conn: Connection, highest: int) -> None:
    """Every message stored from now on gets an id above ``highest`` (a copy's source gave ids up to it)."""
    if highest > _newest_id(conn):  # else SQLite's max + 1 is above it already
        _remember_given(conn, highest)


def _newest_id(conn: Connection) -> int:
    return int(conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()[0])


def _remember_given(conn: Connection, highest: int) -> None:
    """Keep ``highest`` as the highest id given (``IDS_GIVEN``), unless a higher one is kept already."""
    known = meta.get(conn, IDS_GIVEN)
    if known is None or int(known) < highest:
        meta.put(conn, IDS_GIVEN, str(highest))


def is_forgotten(conn: Connection, session_id: str, content_hash: bytes, window_key: str) -> bool:
    """Whether a tombstone (migration m007) names this message: by its identity, or by its dated window key."""
    row = conn.execute(
        "SELECT 1 FROM forgotten WHERE session_id = ? AND content_hash = ?"
        " UNION ALL SELECT 1 FROM forgotten WHERE session_id = ? AND window_key = ? LIMIT 1",
        (session_id, content_hash, session_id, window_key),
    ).fetchone()
    return row is not None


def archived_of(conn: Connection, session_rowid: int, hashes: Sequence[bytes]) -> set[bytes]:
    """Which of these identities the session's messages moved to an archive had (migration m012): stored once,
    in the archive, they are not stored again (an import of the archive restores them instead)."""
    wanted, found = sorted(set(hashes)), set[bytes]()
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT content_hash FROM archived WHERE session_rowid = ? AND content_hash IN ({marks})",
            (session_rowid, *chunk),
        )
        found.update(bytes(row[0]) for row in rows)
    return found


def restored(conn: Connection, session_rowid: int, content_hash: bytes) -> None:
    """An archived message imported back into the store: its identity is the stored row's again."""
    conn.execute("DELETE FROM archived WHERE session_rowid = ? AND content_hash = ?", (session_rowid, content_hash))


def queue_for_embedding(conn: Connection, message_ids: Sequence[int]) -> None:
    conn.executemany("INSERT OR IGNORE INTO embedding_backlog (message_id) VALUES (?)", [(i,) for i in message_ids])


def commit_turn(
    conn: Connection,
    session: SessionRef,
    advancement_key: str,
    records: Sequence[MessageRecord],
    *,
    heartbeat: bool,
) -> tuple[CommitStatus, list[int]]:
    """Store a turn once: a known key writes nothing and answers ``duplicate``."""
    if conn.execute("SELECT 1 FROM turns WHERE advancement_key = ?", (advancement_key,)).fetchone():
        return "duplicate", []
    cursor = conn.execute(
        "INSERT INTO turns (advancement_key, session_rowid, committed_at, message_count, heartbeat)"
        " VALUES (?, ?, ?, ?, ?)",
        (advancement_key, session.rowid, time.time(), len(records), int(heartbeat)),
    )
    turn_rowid = int(cursor.lastrowid)
    fresh = [r for r in records if not (is_turn_identified(r) and claim_imported(conn, session, r, turn_rowid))]
    return "committed", insert_records(conn, session, fresh, turn_rowid=turn_rowid)


def claim_imported(conn: Connection, session: SessionRef, record: MessageRecord, turn_rowid: int) -> bool:
    """An undated message of a turn that the import already stored: claim that copy for the turn instead.

    The import dates an undated message by its transcript entry (``entries.agent_message``), so its copy is
    this one's original plus a ``timestamp``; the two identities differ and would both be stored. The oldest
    copy no turn has claimed is taken, so each imported copy stands for one committed message (a repeated
    "yes" in two turns claims two copies). Rare: the 2026.9.6 host dates every message it commits.
    """
    rows = conn.execute(
        "SELECT id, original FROM messages WHERE session_rowid = ? AND turn_rowid IS NULL AND role = ? AND text = ?"
        " ORDER BY id",
        (session.rowid, record.role, record.text),
    )
    message_id = dated_copy(rows.fetchall(), record)
    if message_id is None:
        return False
    conn.execute("UPDATE messages SET turn_rowid = ? WHERE id = ?", (turn_rowid, message_id))
    return True


def adopt_committed(conn: Connection, session: SessionRef, undated: MessageRecord, imported: MessageRecord) -> bool:
    """The import's side of ``claim_imported``: an undated message a turn already committed takes the imported
    copy's identity (its content hash), so this import and any later one store nothing more for it.

    ``undated`` is the message as the host sent it, ``imported`` the copy dated by its entry. Only a committed
    copy still identified by its turn is taken (one the import matched before carries the import's identity),
    the oldest first.
    """
    rows = conn.execute(
        "SELECT m.id, m.content_hash, t.advancement_key, t.message_count FROM messages m JOIN turns t"
        " ON t.id = m.turn_rowid WHERE m.session_rowid = ? AND m.role = ? AND m.text = ? AND m.original = ?"
        " ORDER BY m.id",
        (session.rowid, undated.role, undated.text, undated.original),
    )
    message_id = turn_identified_copy(rows.fetchall(), undated)
    if message_id is None:
        return False
    conn.execute("UPDATE messages SET content_hash = ? WHERE id = ?", (imported.content_hash, message_id))
    return True


def fetch(conn: Connection, ids: Sequence[int]) -> dict[int, StoredMessage]:
    """Messages by id (missing ids are simply absent)."""
    found: dict[int, StoredMessage] = {}
    for start in range(0, len(ids), 500):
        chunk = list(ids[start : start + 500])
        marks = ",".join("?" * len(chunk))
        for row in conn.execute(f"SELECT {_COLUMNS} FROM messages m WHERE m.id IN ({marks})", chunk):
            found[int(row[0])] = stored_message(row)
    return found


def neighbours(conn: Connection, anchors: Sequence[tuple[int, int]], radius: int, scope: Scope) -> list[Neighbour]:
    """Up to ``radius`` in-scope messages either side of each ``(message id, session rowid)`` in its session.

    One statement for every anchor: per anchor, two short ranges of ``messages_by_session`` (LIMIT ``radius``
    each way), then a primary-key lookup per neighbour, so the cost grows with the anchors, never with the
    history. The CROSS JOIN pins that order, and the scope is checked here rather than in SQL: as a WHERE
    term it lets the planner start from ``messages_by_agent`` and walk the agent's whole history.
    Rows come back in no particular order; the caller ranks them.
    """
    if not anchors or radius <= 0:
        return []
    values = ",".join("(?, ?)" for _ in anchors)
    rows = conn.execute(
        f"WITH anchors(anchor, session) AS (VALUES {values})"
        f" SELECT anchors.anchor, {_COLUMNS} FROM anchors CROSS JOIN messages m ON m.id IN ("
        " SELECT id FROM (SELECT id FROM messages WHERE session_rowid = anchors.session AND id < anchors.anchor"
        " ORDER BY id DESC LIMIT ?) UNION ALL"
        " SELECT id FROM (SELECT id FROM messages WHERE session_rowid = anchors.session AND id > anchors.anchor"
        " ORDER BY id LIMIT ?))",
        [value for pair in anchors for value in pair] + [radius, radius],
    )
    return neighbours_in_scope(rows, scope)


def texts(conn: Connection, ids: Sequence[int]) -> dict[int, str]:
    """The stored text of each message still stored."""
    marks = ",".join("?" * len(ids))
    return {int(r[0]): str(r[1]) for r in conn.execute(f"SELECT id, text FROM messages WHERE id IN ({marks})", ids)}


def newest_window_keys(conn: Connection, session_rowid: int, limit: int) -> list[tuple[int, str]]:
    """``(id, window_key)`` of the session's ``limit`` newest messages: one short range of messages_by_session."""
    rows = conn.execute(
        "SELECT id, window_key FROM messages WHERE session_rowid = ? ORDER BY id DESC LIMIT ?", (session_rowid, limit)
    )
    return [(int(row[0]), str(row[1])) for row in rows]


def count(conn: Connection) -> int:
    """Messages in the store (archived and forgotten ones are gone from it)."""
    return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


_VIEW = "id, role, kind, created_at, text, original, importance, importance_label, cites"


def recent(conn: Connection, session_rowid: int, last: int, up_to: int | None = None) -> list[MessageView]:
    """The last ``last`` messages of a session (up to message ``up_to``), oldest first, originals included."""
    rows = conn.execute(
        f"SELECT {_VIEW} FROM messages WHERE session_rowid = ? AND id <= ? ORDER BY id DESC LIMIT ?",
        (session_rowid, up_to if up_to is not None else 2**62, last),
    ).fetchall()
    return [message_view(row) for row in reversed(rows)]


def around(conn: Connection, message_id: int, context: int) -> Around | None:
    """What a citation points at, in its place in the conversation; None when the id is not stored."""
    row = conn.execute(f"SELECT session_rowid, {_VIEW} FROM messages WHERE id = ?", (message_id,)).fetchone()

    def side(session_rowid: int, older: bool) -> list[Any]:
        bound, order = ("<", "DESC") if older else (">", "")
        return list(
            conn.execute(
                f"SELECT {_VIEW} FROM messages WHERE session_rowid = ? AND id {bound} ? ORDER BY id {order} LIMIT ?",
                (session_rowid, message_id, context),
            ).fetchall()
        )

    return around_of(row, side)
