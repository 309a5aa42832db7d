"""The message vectors' table: a sqlite-vec ``vec0`` table any SQLite shell with sqlite-vec can search.

Each row is one message's vector as int8 codes (``embedding int8[N]``, cosine distance), with its session
and the per-vector scale that turns the codes back into floats (``store/quantize.py`` says why int8 with a
scale keeps the ranking); both are ``vec0`` metadata columns, so a KNN query can filter by session. Cosine
ignores the scale, so sqlite-vec's own KNN on the codes ranks as the sidecar does.

Why not an ordinary table: the store is meant to be readable by other tools, and a ``vec0`` table is what
sqlite-vec's ``MATCH ... AND k = N`` searches. Why the sidecar still keeps its own index in RAM
(``embed/index.py``): sqlite-vec 0.1.9 scans every vector exactly, 20 to 40 times as long as that index's
search on the same vectors (``benchmarks/vec_knn.py``, 100k and 1M): too slow for a turn's recall.

Loading: ``vec0`` returns its rows one at a time through the virtual-table interface, so ``read_all`` reads
its chunk tables directly (a chunk holds 1,024 rows: validity bits, rowids, the codes and each metadata column
as one blob apiece; docs/decisions/0008). When those tables are not laid
out as expected (another sqlite-vec version), it falls back to the plain ``SELECT``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence

import numpy as np
import numpy.typing as npt

from openclaw_lossless.store.model.vectors import StoredVectors
from openclaw_lossless.store.sqlite.connection import Connection

TABLE = "message_vectors"
# The vec0 rowids table: one ordinary row per stored vector whose rowid is the message id (its ``id`` column is
# NULL for an INTEGER PRIMARY KEY table); read directly, it answers "which messages have a vector" at B-tree
# speed, where a correlated lookup through ``vec0`` costs a virtual-table call per message. Salvage reads it as
# a witness.
ROWIDS_TABLE = f"{TABLE}_rowids"
_BATCH = 50000


def create(conn: Connection, dimension: int) -> None:
    """Create the empty vector table for vectors of ``dimension`` components."""
    conn.execute(
        f"CREATE VIRTUAL TABLE {TABLE} USING vec0(message_id INTEGER PRIMARY KEY,"
        f" embedding int8[{int(dimension)}] distance_metric=cosine, session_rowid INTEGER, scale FLOAT)"
    )


def recreate(conn: Connection, dimension: int) -> None:
    """Drop every stored vector and start an empty table (another model's vectors are never mixed in)."""
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    create(conn, dimension)


def exists(conn: Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone() is not None


def write(
    conn: Connection,
    ids: Sequence[int],
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    sessions: Sequence[int],
) -> None:
    """Store (or replace) these messages' vectors, skipping a message forgotten while it was being embedded.

    ``vec0`` has no ``INSERT OR REPLACE``: a message embedded again (its text was redacted) loses its old row
    first.
    """
    _delete_each(conn, _present(conn, ids))
    conn.executemany(
        f"INSERT INTO {TABLE} (message_id, embedding, session_rowid, scale)"
        " SELECT ?, vec_int8(?), ?, ? WHERE EXISTS (SELECT 1 FROM messages WHERE id = ?)",
        [
            (int(i), code.tobytes(), int(s), float(scale), int(i))
            for i, code, scale, s in zip(ids, codes, scales, sessions, strict=True)
        ],
    )


def delete(conn: Connection, ids: Sequence[int]) -> None:
    """Delete these messages' vectors."""
    if exists(conn):
        _delete_each(conn, _present(conn, ids))


def delete_through(conn: Connection, last_id: int, limit: int | None = None) -> int:
    """Delete the vectors of messages up to ``last_id`` (archiving), at most ``limit`` of them; returns how many.

    ``vec0`` deletes a row at a time (it rewrites the row's slot in its chunk), so the
    archive deletes a large range in slices of its own transactions (``archive.prune``) and commits keep
    going in between.
    """
    if not exists(conn):
        return 0
    sql = f"SELECT rowid FROM {ROWIDS_TABLE} WHERE rowid <= ? ORDER BY rowid" + (" LIMIT ?" if limit else "")
    found = [int(r[0]) for r in conn.execute(sql, (last_id, limit) if limit else (last_id,))]
    _delete_each(conn, found)
    return len(found)


def _present(conn: Connection, ids: Sequence[int]) -> list[int]:
    """Those of ``ids`` that hold a vector, read from the rowids table by key."""
    marks = json.dumps([int(i) for i in ids])
    found = conn.execute(f"SELECT rowid FROM {ROWIDS_TABLE} WHERE rowid IN (SELECT value FROM json_each(?))", (marks,))
    return [int(r[0]) for r in found]


def _delete_each(conn: Connection, ids: Sequence[int]) -> None:
    """One ``DELETE ... WHERE message_id = ?`` per id: a point delete in ``vec0``. A condition on a set of ids
    (``IN (...)``) makes SQLite scan the whole virtual table instead (0.7 s for 100 ids among 100,000)."""
    conn.executemany(f"DELETE FROM {TABLE} WHERE message_id = ?", [(int(i),) for i in ids])


def in_current_format(conn: Connection) -> bool:
    """Whether the vectors are in this version's ``vec0`` table (a store not yet migrated has an older one)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (ROWIDS_TABLE,)).fetchone() is not None


def id_range(conn: Connection) -> tuple[int, int] | None:
    """The lowest and highest message id holding a vector (None when there is none)."""
    low, high = conn.execute(f"SELECT min(rowid), max(rowid) FROM {ROWIDS_TABLE}").fetchone()
    return None if high is None else (int(low), int(high))


def count(conn: Connection) -> int:
    return int(conn.execute(f"SELECT count(*) FROM {ROWIDS_TABLE}").fetchone()[0]) if exists(conn) else 0


def queue_missing(conn: Connection) -> int:
    """Queue every message that has no vector; returns how many were queued."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT id FROM messages m"
        f" WHERE NOT EXISTS (SELECT 1 FROM {ROWIDS_TABLE} v WHERE v.rowid = m.id)"
    )
    return int(cursor.rowcount)


def unaccounted(conn: Connection) -> tuple[int, int]:
    """(messages with no vector that are not queued, vectors of no stored message): both 0 in a sound store."""
    missing = conn.execute(
        f"SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM {ROWIDS_TABLE} v WHERE v.rowid = m.id)"
        " AND NOT EXISTS (SELECT 1 FROM embedding_backlog b WHERE b.message_id = m.id)"
    ).fetchone()[0]
    orphans = conn.execute(
        f"SELECT count(*) FROM {ROWIDS_TABLE} v WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = v.rowid)"
    ).fetchone()[0]
    return int(missing), int(orphans)


def read_all(conn: Connection, dimension: int) -> Iterator[StoredVectors]:
    """Every stored vector, in blocks: from the chunk tables when they read as expected, else row by row."""
    if _chunks_readable(conn, dimension):
        yield from _chunk_blocks(conn, dimension)
    else:
        yield from _select_blocks(conn, dimension)


_SHADOW_COLUMNS = {
    "chunks": ["chunk_id", "size", "validity", "rowids"],
    "vector_chunks00": ["rowid", "vectors"],
    "metadatachunks00": ["rowid", "data"],
    "metadatachunks01": ["rowid", "data"],
}


def _chunks_readable(conn: Connection, dimension: int) -> bool:
    """Whether the chunk tables have the layout ``_chunk_blocks`` reads and account for every stored vector."""
    for suffix, wanted in _SHADOW_COLUMNS.items():
        columns = [str(r[1]) for r in conn.execute(f"PRAGMA table_info({TABLE}_{suffix})")]
        if columns[: len(wanted)] != wanted:
            return False
    valid = 0
    for size, validity in conn.execute(f"SELECT size, validity FROM {TABLE}_chunks"):
        if len(validity) * 8 < size:
            return False
        valid += int(np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].sum())
    return valid == count(conn)


def _chunk_blocks(conn: Connection, dimension: int) -> Iterator[StoredVectors]:
    """One block per ``vec0`` chunk, read from its shadow tables.

    Each chunk's blobs are fetched by key, three lookups a chunk: the tables key them by a column named
    ``rowid`` (not SQLite's own), and joined in one statement the planner scanned them inside each other (two
    minutes at 1M vectors instead of about a second).
    """
    chunks = conn.execute(f"SELECT chunk_id, size, validity, rowids FROM {TABLE}_chunks ORDER BY chunk_id")
    for chunk_id, size, validity, rowids in chunks.fetchall():
        vectors, sessions, scales = (
            conn.execute(f"SELECT {column} FROM {TABLE}_{table} WHERE rowid = ?", (chunk_id,)).fetchone()[0]
            for table, column in (
                ("vector_chunks00", "vectors"),
                ("metadatachunks00", "data"),
                ("metadatachunks01", "data"),
            )
        )
        if not (len(vectors) == size * dimension and len(rowids) == len(sessions) == len(scales) == 8 * size):
            raise ValueError(f"a {TABLE} chunk of an unexpected size: run 'openclaw-lossless doctor'")
        valid = np.unpackbits(np.frombuffer(validity, dtype=np.uint8), bitorder="little")[:size].astype(bool)
        yield StoredVectors(
            np.frombuffer(rowids, dtype="<i8")[valid].astype(np.int64),
            np.frombuffer(vectors, dtype=np.int8).reshape(size, dimension)[valid],
            np.frombuffer(scales, dtype="<f8")[valid].astype(np.float32),
            np.frombuffer(sessions, dtype="<i8")[valid].astype(np.int64),
        )


def _select_blocks(conn: Connection, dimension: int) -> Iterator[StoredVectors]:
    """The rows through ``vec0`` itself: slower (~2-3 s per 100,000), but needs no knowledge of its layout."""
    cursor = conn.execute(f"SELECT message_id, session_rowid, scale, embedding FROM {TABLE}")
    while rows := cursor.fetchmany(_BATCH):
        yield StoredVectors(
            np.array([r[0] for r in rows], dtype=np.int64),
            np.frombuffer(b"".join(r[3] for r in rows), dtype=np.int8).reshape(len(rows), dimension),
            np.array([r[2] for r in rows], dtype=np.float32),
            np.array([r[1] for r in rows], dtype=np.int64),
        )
