"""The scale benchmark's bulk fill for PostgreSQL: the rows ``commit_turn`` writes, loaded with ``COPY``.

Why: through ``commit_turn`` (``scale_data.fill``) PostgreSQL takes ~470 messages a second on two cores, so
a 1,000,000-message store takes over half an hour to fill before anything is measured. What is measured is
the store once filled, not the fill, so this writes the same rows the commit path leaves, in the same order
and with the same ids, a chunk of whole sessions per transaction:

- ``sessions`` through the backend's own ``ensure_session`` (a few thousand rows);
- ``turns``, one per 4 messages with the commit path's advancement keys (``{session_id}-t{n}``), and
  ``messages`` with every column ``insert_records`` sets (the text as ``pg_text`` stores it, the date words
  of ``date_terms``), by binary ``COPY``; ``search`` is a generated column, computed by the server as
  for an insert. Ids are taken from the tables' identity sequences, a block per chunk, so the ids are
  those the commit path hands out and a later commit-turn gets the next ones;
- ``message_days`` through the backend's own ``index_many`` (one statement per chunk);
- the vectors by binary ``COPY`` as ``store_vectors`` stores them (int8 codes times their scale, as half
  floats; the same real and stand-in vectors: ``scale_data.VectorSource``), and into the baseline's
  ``vec0`` file. No message is left on the embedding backlog, as ``store_vectors`` leaves none.

The store is new and the fill alone on it, so what the commit path guards against cannot happen here: no
tombstones to respect, no other writer to order ids against, no imported copy to claim; a message whose
identity its session already holds is still left out, as ``ON CONFLICT DO NOTHING`` would.

The secondary indexes of ``messages`` (the GIN keyword index above all: each row's words are a dozen
posting-tree updates with ``fastupdate = off``) are dropped before the fill and built again after, each
from the definition the catalog holds (``pg_get_indexdef``), so they come back exactly as the migrations
made them. ``tests/postgres/test_scale_fill.py`` checks the two fills leave the same rows.

The rows are the same; their bytes on disk nearly so. At 100,000 messages (beyond the text, per message): 3,669
bytes after this fill against 3,660 after the commit path; the keyword index built in one go is 85 bytes
against 101 grown row by row, the heap 42 bytes more (``COPY`` fills its pages a little less), and the
commit path leaves an 18-byte backlog index of rows queued and taken off again.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import sql

from benchmarks.scale_data import (
    AGENT,
    FillReport,
    Message,
    VectorSource,
    _store_baseline,
    agent_message,
    bulk_record,
    session_chunks,
)
from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.store import quantize
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.postgres import message_days, vectors
from openclaw_lossless.store.postgres import sessions as pg_sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.messages import date_terms, hold_id_order, pg_text
from openclaw_lossless.store.sqlite.connection import Connection as SqliteConnection

TURN_SIZE = 4  # messages a turn, as ``scale_data._store_sessions`` commits them
_TURN_COLUMNS = ("id", "advancement_key", "session_rowid", "committed_at", "message_count", "heartbeat")
_TURN_TYPES = ("int8", "text", "int8", "float8", "int4", "bool")
_MESSAGE_COLUMNS = ("id", "session_rowid", "agent_id", "turn_rowid", "role", "kind", "created_at", "stored_at",
                    "text", "original", "content_hash", "window_key", "tokens", "importance", "importance_label",
                    "cites", "date_terms", "grams")  # fmt: skip
_MESSAGE_TYPES = ("int8", "int8", "text", "int8", "text", "text", "float8", "float8", "text", "text", "bytea", "text",
                  "int8", "float8", "text", "int8", "text", "text")  # fmt: skip
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00" + bytes(8)  # binary COPY's header: no flags, no extension
_TRAILER = b"\xff\xff"


@dataclass
class Turn:
    """One turn of the fill as ``commit_turn`` gets it: its session, key and records, and those it stores."""

    session_id: str
    key: str
    records: list[MessageRecord]
    kept: list[MessageRecord]  # the records whose identity the session did not hold yet


def fill(
    db: Database,
    baseline: SqliteConnection,
    total: int,
    real_texts_vectors: Vectors,
    *,
    chunk: int = 20000,
    seed: int = 5,
    unspaced_share: float = 0.0,
) -> FillReport:
    """``scale_data.fill``'s store for PostgreSQL (same arguments, same rows), written with ``COPY``."""
    began = time.monotonic()
    source = VectorSource(real_texts_vectors, seed)
    made, sessions = 0, 0
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="fill-prepare") as prepare:
        chunks = session_chunks(total, chunk, seed, unspaced_share)
        ahead = prepare.submit(_prepare, chunks, source)
        while (ready := ahead.result()) is not None:
            ahead = prepare.submit(_prepare, chunks, source)  # the next while the server takes this one
            turns, floats = ready
            ids = db.write(lambda conn, t=turns, f=floats: _write_chunk(conn, t, f))  # type: ignore[misc]
            _store_baseline(baseline, ids, floats)
            made += len(ids)
            sessions += len({t.session_id for t in turns})
    return FillReport(made, sessions, time.monotonic() - began, min(len(real_texts_vectors), made))


def _prepare(
    chunks: Iterator[list[tuple[str, list[Message]]]], source: VectorSource
) -> tuple[list[Turn], Vectors] | None:
    """The next chunk's turns and vectors (None after the last), made in a thread of their own while the server
    stores the previous chunk; one chunk at a time, in order (the vectors are taken in message order), and
    outside the transaction, so a retried one takes no more."""
    pending = next(chunks, None)
    if pending is None:
        return None
    turns = chunk_turns(pending)
    return turns, source.take(sum(len(t.kept) for t in turns))


def chunk_turns(pending: list[tuple[str, list[Message]]]) -> list[Turn]:
    """The chunk's turns of ``TURN_SIZE`` messages, each message's record as ``scale_data`` makes it; a record
    whose content hash its session already holds is left out, as the commit path's ``ON CONFLICT DO NOTHING``
    leaves it."""
    turns: list[Turn] = []
    for session_id, batch in pending:
        seen: set[bytes] = set()
        for n, start in enumerate(range(0, len(batch), TURN_SIZE)):
            records = [bulk_record(agent_message(m)) for m in batch[start : start + TURN_SIZE]]
            kept: list[MessageRecord] = []
            for record in records:
                if record.content_hash not in seen:
                    seen.add(record.content_hash)
                    kept.append(record)
            turns.append(Turn(session_id, f"{session_id}-t{n}", records, kept))
    return turns


def _write_chunk(conn: Connection, turns: list[Turn], floats: Vectors) -> npt.NDArray[np.int64]:
    """One chunk in the caller's transaction: sessions, turns, messages, their days and vectors; the ids."""
    refs: dict[str, SessionRef] = {}
    for turn in turns:
        if turn.session_id not in refs:
            refs[turn.session_id] = _ensure_session(conn, turn.session_id)
    turn_id = reserve_ids(conn, "turns", len(turns))
    message_id = reserve_ids(conn, "messages", len(floats))
    turn_rows: list[tuple[Any, ...]] = []
    message_rows: list[tuple[Any, ...]] = []
    days: list[tuple[int, str, str, float]] = []
    sessions: list[int] = []
    now = time.time()
    for turn in turns:
        ref = refs[turn.session_id]
        turn_rows.append((turn_id, turn.key, ref.rowid, now, len(turn.records), False))
        for record in turn.kept:
            message_rows.append(_message_row(message_id, ref, turn_id, now, record))
            days.append((message_id, record.role, record.text, record.created_at))
            sessions.append(ref.rowid)
            message_id += 1
        turn_id += 1
    hold_id_order(conn)
    _copy_rows(conn, "turns", _TURN_COLUMNS, _TURN_TYPES, turn_rows)
    _copy_rows(conn, "messages", _MESSAGE_COLUMNS, _MESSAGE_TYPES, message_rows)
    message_days.index_many(conn, days)
    ids = np.asarray([d[0] for d in days], dtype=np.int64)
    _copy_vectors(conn, ids, np.asarray(sessions, dtype=np.int64), floats)
    return ids


def _ensure_session(conn: Connection, session_id: str) -> SessionRef:
    return pg_sessions.ensure_session(conn, session_id, f"agent:{AGENT}:{session_id}")


def _message_row(ident: int, ref: SessionRef, turn: int, now: float, r: MessageRecord) -> tuple[Any, ...]:
    """A message as ``messages.insert_records`` stores it (``kind`` its default, no citation)."""
    text, terms = pg_text(r.text), date_terms(r.created_at)
    return (ident, ref.rowid, ref.agent_id, turn, r.role, "message", r.created_at, now, text, r.original,
            r.content_hash, r.window_key, r.tokens, r.importance, r.importance_label, None, terms,
            gram_text(text))  # fmt: skip


def reserve_ids(conn: Connection, table: str, count: int) -> int:
    """The first of ``count`` consecutive ids taken from ``table``'s identity sequence, as ``count`` inserts
    with default ids would take them (the next insert gets the one after the last)."""
    sequence = conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", (table,)).fetchone()
    assert sequence is not None and sequence[0] is not None, f"{table}.id has no identity sequence"
    if count == 0:
        return 0
    first = conn.execute("SELECT nextval(%s)", (sequence[0],)).fetchone()
    assert first is not None
    if count > 1:
        conn.execute("SELECT setval(%s, %s)", (sequence[0], int(first[0]) + count - 1))
    return int(first[0])


def _copy_rows(
    conn: Connection, table: str, columns: tuple[str, ...], types: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    statement = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, columns))
    )
    with conn.cursor() as cursor, cursor.copy(statement) as copy:
        copy.set_types(list(types))
        for row in rows:
            copy.write_row(row)


def _copy_vectors(
    conn: Connection, ids: npt.NDArray[np.int64], sessions: npt.NDArray[np.int64], floats: Vectors
) -> None:
    """The vectors as ``store_vectors`` stores them (int8 codes times their scale, as half floats), every row
    of the agent ``AGENT``; one binary ``COPY`` buffer made by numpy, fixed-width rows."""
    if not len(ids):
        return
    stored = quantize.dequantize(*quantize.quantize(floats))
    dimension = stored.shape[1]
    agent = AGENT.encode()
    row = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i8"), ("agent_len", ">i4"),
                    ("agent", f"S{len(agent)}"), ("session_len", ">i4"), ("session", ">i8"), ("vector_len", ">i4"),
                    ("dimension", ">u2"), ("unused", ">u2"), ("vector", ">f2", (dimension,))])  # fmt: skip
    rows = np.zeros(len(ids), dtype=row)
    rows["fields"], rows["id_len"], rows["id"] = 4, 8, ids
    rows["agent_len"], rows["agent"] = len(agent), agent
    rows["session_len"], rows["session"] = 8, sessions
    rows["vector_len"], rows["dimension"], rows["vector"] = 4 + 2 * dimension, dimension, stored
    statement = sql.SQL("COPY {} (message_id, agent_id, session_rowid, embedding) FROM STDIN (FORMAT BINARY)")
    with conn.cursor() as cursor, cursor.copy(statement.format(sql.Identifier(vectors.TABLE))) as copy:
        copy.write(_SIGNATURE + rows.tobytes() + _TRAILER)


# -- the indexes built after the fill -------------------------------------------------------------------------------

BULK_INDEXES = ("messages_search", "messages_by_agent", "messages_by_session", "messages_scope")


def drop_indexes(db: Database, names: tuple[str, ...] = BULK_INDEXES) -> list[tuple[str, str]]:
    """Drop these indexes (those the store holds), returning each one's name and definition to build it again."""

    def work(conn: Connection) -> list[tuple[str, str]]:
        rows = conn.execute(
            "SELECT c.relname, pg_get_indexdef(c.oid) FROM pg_class c"
            " WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'i' AND c.relname = ANY(%s)",
            (list(names),),
        ).fetchall()
        for name, _ in rows:
            conn.execute(sql.SQL("DROP INDEX {}").format(sql.Identifier(str(name))))
        return [(str(name), str(definition)) for name, definition in rows]

    return db.write(work)


def build_indexes(db: Database, definitions: list[tuple[str, str]]) -> dict[str, float]:
    """Build each dropped index again from its definition; seconds per index."""
    took: dict[str, float] = {}
    for name, definition in definitions:
        began = time.monotonic()
        db.write(lambda conn, d=definition: conn.execute(d))  # type: ignore[misc]
        took[name] = round(time.monotonic() - began, 1)
    return took
