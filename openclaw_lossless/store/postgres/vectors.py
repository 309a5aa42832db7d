"""The message vectors on PostgreSQL: ``halfvec(N)`` rows with an IVFFlat index (cosine), searched in the database.

Several sidecars share one store, so the search runs in the database (``nearest``), not in a per-process copy
as on SQLite (``embed/index.py``): a vector one sidecar writes is found by every other once its transaction
commits. Callers hand over int8 codes and scales (``api.Vectors.write``); a row stores ``code × scale`` as half
floats, and ``read_all`` turns the rows back into codes and scales. Each row carries its message's agent and
session, so the scope (``scope_filter``) filters the index scan without a join, and goes with its message
(``ON DELETE CASCADE``).

Search (``nearest_many``) ranks a scope of at most ``EXACT_ROWS`` messages whole and exactly; a larger one reads
the IVFFlat lists (``INDEX``) nearest the query, as many as hold ``READ_VECTORS`` vectors (at least ``PROBES``),
with pgvector's iterative scan up to ``MAX_PROBES`` lists for ``OVERFETCH × k`` rows, re-sorted exactly; should
it still fall short, the exact path answers. A search's later queries read the caller's ``later_share`` of the
lists. ``keep_index`` makes the index in the background (``CREATE INDEX CONCURRENTLY``) once the table holds
``BUILD_AT`` vectors and again each time it has grown ``REBUILD_GROWTH`` times, one sidecar at a time.

Why IVFFlat and not HNSW or binary quantization, the list sizes, and the figures:
docs/decisions/0002-postgres-vector-index.md.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import Cursor, sql

from openclaw_lossless.store import quantize
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.model.vectors import StoredVectors
from openclaw_lossless.store.postgres.connection import Connection, Database, set_search_path

TABLE = "message_vectors"
INDEX = "message_vectors_lists"  # the IVFFlat index, made by ``keep_index``
NEXT_INDEX = "message_vectors_lists_next"  # the next one while it is made (an invalid one is left by a cut-short build)
LIST_ROWS = 250  # vectors per list when the index is made, up to MAX_LISTS (finer lists: decisions/0002)
MAX_LISTS = 2000  # k-means needs samples × lists floats: ~0.8 GB of maintenance_work_mem at 2,000, 3.2 at 4,000
BUILD_AT = 10000  # vectors in the table before the first index: fewer are ranked whole or read whole quickly
REBUILD_GROWTH = 2  # the index is made again once the table holds this many times the vectors it was made for
BUILD_MEMORY = "1GB"  # maintenance_work_mem for the build (the session's own; the server's default is 64 MB)
LOCK_KEY = 0x6C6F7376  # "losv": the advisory lock of one build at a time, with the schema's hash
READ_VECTORS = 50_000  # vectors a search reads, in whole lists: 200 lists up to MAX_LISTS, 100 at 1M
PROBES = 100  # lists read per search at the least (beyond 1M, where lists hold more than 500 vectors)
MAX_PROBES = 400  # lists an iterative scan may read for a scope whose rows are sparse in the nearest lists
EXACT_ROWS = 20000  # a scope of at most this many messages is ranked whole, exactly (docs/decisions/0002)
OVERFETCH = 2  # rows asked of the index per row wanted: relaxed order, then an exact sort of them all
_BLOCK = 10000  # rows per block of ``read_all``: ~8 MB of half floats at 384 dimensions
_HALF = np.dtype(">f2")  # halfvec's binary form: dimension (uint16), unused (uint16), then big-endian halves


def create(conn: Connection, dimension: int) -> None:
    """The empty vector table for ``dimension`` components (as migration m003 makes it, without the index m005
    dropped: ``keep_index`` makes one once there are vectors to learn its lists from).

    A copy of the migration's statements, not a call into it: a shipped migration stays as it shipped, while
    this follows the current layout.
    """
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,"
            " agent_id text NOT NULL, session_rowid bigint NOT NULL, embedding halfvec({}) NOT NULL)"
        ).format(sql.Identifier(TABLE), sql.Literal(int(dimension)))
    )


# -- the index --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexState:
    rows: int  # vectors in the table
    made_for: int | None  # the vectors the valid index was made for (its comment); None without one
    lists: int | None  # the valid index's lists; None without one
    unfinished: bool  # a next index is there, not yet valid: a build under way, or one cut short

    @property
    def due(self) -> bool:
        """Whether an index should be made now: none yet, or the table has outgrown the one there is."""
        if self.rows < BUILD_AT:
            return False
        return self.made_for is None or self.rows >= REBUILD_GROWTH * max(self.made_for, 1)


# The valid index's lists (its option) and the vectors it was made for (its comment): one row, NULLs without
# a valid index. Read by ``index_state`` and by every search's settings (how many lists to read).
_MADE = (
    "SELECT (SELECT substr(o, 7)::int FROM unnest(c.reloptions) o WHERE starts_with(o, 'lists=')) AS lists,"
    " CASE WHEN d ~ '^[0-9]+$' THEN d::bigint END AS made_for FROM pg_class c"
    " JOIN pg_index x ON x.indexrelid = c.oid AND x.indisvalid CROSS JOIN obj_description(c.oid, 'pg_class') d"
    " WHERE c.oid = to_regclass(%(index)s)"
)


def index_state(conn: Connection) -> IndexState:
    """The vectors, the valid index's comment and lists, and whether a next one is there: one statement."""
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM {TABLE}), i.made_for, i.lists, to_regclass(%(next)s) IS NOT NULL"
        f" FROM (SELECT 1) one LEFT JOIN ({_MADE}) i ON true",
        {"index": INDEX, "next": NEXT_INDEX},
    ).fetchone()
    assert row is not None
    return IndexState(
        rows=int(row[0]),
        made_for=None if row[1] is None else int(row[1]),
        lists=None if row[2] is None else int(row[2]),
        unfinished=bool(row[3]),
    )


def lists_for(rows: int) -> int:
    return max(1, min(MAX_LISTS, rows // LIST_ROWS))


def keep_index(db: Database, force: bool = False, building: Callable[[Connection | None], None] | None = None) -> bool:
    """Make the IVFFlat index if it is due (``IndexState.due``), or at once with ``force`` (a bulk load just
    ended); True when this call made one. ``building`` is handed the build's connection when it opens, and
    None when it closes, so a sidecar shutting down can cancel the build (``Connection.cancel_safe``).

    Whether it is due is read on a pooled connection (the check runs every minute a sidecar writes). The
    build runs on a connection of its own, outside any transaction (``CONCURRENTLY``: commits and searches go
    on while the lists are learnt and filled, ~2 minutes of one server core at 1M), under a session-level
    advisory lock: one sidecar builds, the others see the lock taken and leave it. The new index is made
    beside the old one and takes its name once valid, so searches always have one. A build cut short (the
    process killed) leaves an invalid ``NEXT_INDEX``, dropped by the next build.
    """
    reader = db.reader()
    if not exists(reader) or not (force or index_state(reader).due):
        return False
    with psycopg.connect(db.url, autocommit=True) as conn:
        if building is not None:
            building(conn)
        try:
            return _build_under_lock(conn, db.schema, force)
        finally:
            if building is not None:
                building(None)


def _build_under_lock(conn: Connection, schema: str, force: bool) -> bool:
    set_search_path(conn, schema)
    key = (LOCK_KEY, schema)
    row = conn.execute("SELECT pg_try_advisory_lock(%s::int, hashtext(%s))", key).fetchone()
    if row is None or not row[0]:
        return False
    try:
        state = index_state(conn)  # again under the lock: another sidecar may have just made it
        if not (force or state.due):
            return False
        make_index(conn, state.rows)
        return True
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s::int, hashtext(%s))", key)


def make_index(conn: Connection, rows: int) -> None:
    """Make the index for a table of ``rows`` vectors and put it in place of the one there is (if any).
    ``conn`` is in autocommit, with the store's search path."""
    table, index, following = sql.Identifier(TABLE), sql.Identifier(INDEX), sql.Identifier(NEXT_INDEX)
    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(following))
    conn.execute(sql.SQL("SET maintenance_work_mem = {}").format(sql.Literal(BUILD_MEMORY)))
    conn.execute(
        sql.SQL("CREATE INDEX CONCURRENTLY {} ON {} USING ivfflat (embedding halfvec_cosine_ops) WITH (lists = {})")
        .format(following, table, sql.Literal(lists_for(rows)))
    )  # fmt: skip
    conn.execute(sql.SQL("COMMENT ON INDEX {} IS {}").format(following, sql.Literal(str(rows))))
    conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(index))
    conn.execute(sql.SQL("ALTER INDEX {} RENAME TO {}").format(following, index))


def recreate(conn: Connection, dimension: int) -> None:
    """Drop every stored vector and start an empty table for ``dimension`` (the provider changed); its index
    comes once it holds ``BUILD_AT`` vectors.

    Inside the caller's transaction, all or nothing: another sidecar's search or write waits for the drop's
    lock until it commits, then finds the new, empty table by name (a rollback leaves the old one whole).
    """
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(TABLE)))
    create(conn, dimension)


def exists(conn: Connection) -> bool:
    """Whether the store's schema (the first on the search path) holds the vector table."""
    row = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = current_schema() AND tablename = %s", (TABLE,)
    ).fetchone()
    return row is not None


def in_current_format(conn: Connection) -> bool:
    """Whether the vectors are in this version's table: the only layout a PostgreSQL store has had so far."""
    return exists(conn)


def table_dimension(conn: Connection) -> int | None:
    """The table's dimension (the ``N`` of ``halfvec(N)``), None without a table."""
    row = conn.execute(
        "SELECT a.atttypmod FROM pg_attribute a WHERE a.attrelid = to_regclass(%s) AND a.attname = 'embedding'",
        (TABLE,),
    ).fetchone()
    return None if row is None else int(row[0])


def write(
    conn: Connection,
    ids: Sequence[int],
    codes: npt.NDArray[np.int8],
    scales: npt.NDArray[np.float32],
    sessions: Sequence[int],
) -> None:
    """Store (or replace) these messages' vectors as ``code × scale``; a message no longer stored gets none.

    One statement for the batch: the vectors go over as one flat ``real[]``, converted once (a one-row
    subquery, never a cast per row: a prepared statement's generic plan cast the whole batch again for each
    row, 5,000 vectors took minutes) and sliced per row. The agent comes from the message's row (what the
    scope filters on). An id given twice keeps its last vector, as two writes in a row would.
    """
    if not len(ids):
        return
    floats = quantize.dequantize(codes, scales)
    width = floats.shape[1]
    conn.execute(
        f"INSERT INTO {TABLE} (message_id, agent_id, session_rowid, embedding)"
        " SELECT DISTINCT ON (i.id) i.id, m.agent_id, i.session, (flat.a[(i.n - 1) * %s + 1 : i.n * %s])::halfvec"
        " FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS i(id, session, n)"
        " CROSS JOIN (SELECT %s::real[] AS a) flat JOIN messages m ON m.id = i.id ORDER BY i.id, i.n DESC"
        " ON CONFLICT (message_id) DO UPDATE SET agent_id = excluded.agent_id,"
        " session_rowid = excluded.session_rowid, embedding = excluded.embedding",
        (width, width, [int(i) for i in ids], [int(s) for s in sessions], floats.ravel().tolist()),
        prepare=False,
    )


def delete(conn: Connection, ids: Sequence[int]) -> None:
    """Delete these messages' vectors (a message deleted loses its own through the foreign key)."""
    conn.execute(f"DELETE FROM {TABLE} WHERE message_id = ANY(%s::bigint[])", ([int(i) for i in ids],))


def id_range(conn: Connection) -> tuple[int, int] | None:
    """The lowest and highest message id holding a vector (None when there is none)."""
    row = conn.execute(f"SELECT min(message_id), max(message_id) FROM {TABLE}").fetchone()
    return None if row is None or row[1] is None else (int(row[0]), int(row[1]))


def count(conn: Connection) -> int:
    if not exists(conn):
        return 0
    row = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()
    return 0 if row is None else int(row[0])


# Counted exactly up to this many vectors; beyond, estimated (``estimated_count``).
COUNTED_EXACTLY = 100_000
# The planner's own estimate of a table's rows: its rows per page at the last ANALYZE (autovacuum's or a
# manual one) times its pages now, so it follows the growth since. No row without the table.
_ESTIMATE = (
    "SELECT CASE WHEN c.relpages > 0 AND c.reltuples >= 0"
    " THEN round(c.reltuples / c.relpages * (pg_relation_size(c.oid) / current_setting('block_size')::int))"
    f" END FROM pg_class c WHERE c.oid = to_regclass('{TABLE}')"
)


def estimated_count(conn: Connection) -> int:
    """The vectors stored: beyond ``COUNTED_EXACTLY`` the server's estimate (within a few percent), exact below
    it or before the table's first ANALYZE. What a health check can afford: an exact count reads every row's
    entry (docs/decisions/0002), and ``/healthz`` is polled by supervisors and monitors, of each
    sidecar."""
    row = conn.execute(_ESTIMATE).fetchone()
    if row is None:
        return 0
    if row[0] is not None and int(row[0]) > COUNTED_EXACTLY:
        return int(row[0])
    return count(conn)


def queue_missing(conn: Connection) -> int:
    """Queue every message that has no vector; returns how many were queued (not queued already)."""
    cursor = conn.execute(
        "INSERT INTO embedding_backlog (message_id) SELECT id FROM messages m"
        f" WHERE NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.message_id = m.id) ON CONFLICT DO NOTHING"
    )
    return max(cursor.rowcount, 0)


def unaccounted(conn: Connection) -> tuple[int, int]:
    """(messages with no vector that are not queued, vectors of no stored message): both 0 in a sound store."""
    row = conn.execute(
        f"SELECT (SELECT count(*) FROM messages m WHERE NOT EXISTS (SELECT 1 FROM {TABLE} v WHERE v.message_id = m.id)"
        " AND NOT EXISTS (SELECT 1 FROM embedding_backlog b WHERE b.message_id = m.id)),"
        f" (SELECT count(*) FROM {TABLE} v WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = v.message_id))"
    ).fetchone()
    return (0, 0) if row is None else (int(row[0]), int(row[1]))


def read_all(conn: Connection, dimension: int) -> Iterator[StoredVectors]:
    """Every stored vector, in blocks of ``_BLOCK`` in id order, as int8 codes and scales again.

    The codes come back as written: ``code × scale`` in half precision is off by under 0.07 of a code step
    at the largest component, so quantizing it again rounds to the same codes.
    """
    after = 0
    with conn.cursor(binary=True) as cursor:
        while True:
            rows = cursor.execute(
                f"SELECT message_id, session_rowid, embedding FROM {TABLE}"
                " WHERE message_id > %s ORDER BY message_id LIMIT %s",
                (after, _BLOCK),
            ).fetchall()
            if not rows:
                return
            floats = _halves([r[2] for r in rows], dimension)
            codes, scales = quantize.quantize(floats)
            yield StoredVectors(
                np.array([r[0] for r in rows], dtype=np.int64),
                codes,
                scales,
                np.array([r[1] for r in rows], dtype=np.int64),
            )
            after = int(rows[-1][0])


def embeddings(conn: Connection, ids: Sequence[int]) -> tuple[list[int], npt.NDArray[np.float32]]:
    """The stored vectors of those of ``ids`` that hold one, as float32 rows: (their ids, the rows)."""
    with conn.cursor(binary=True) as cursor:
        rows = cursor.execute(
            f"SELECT message_id, embedding FROM {TABLE} WHERE message_id = ANY(%s::bigint[]) ORDER BY message_id",
            ([int(i) for i in ids],),
        ).fetchall()
    return [int(r[0]) for r in rows], _halves([r[1] for r in rows], None)


def _halves(blobs: Sequence[bytes], dimension: int | None) -> npt.NDArray[np.float32]:
    """halfvec values in binary form, as float32 rows (``dimension`` is checked when given)."""
    if not blobs:
        return np.zeros((0, dimension or 0), dtype=np.float32)
    width = int.from_bytes(blobs[0][:2], "big")
    if dimension is not None and width != dimension:
        raise ValueError(f"the stored vectors have {width} dimensions, not {dimension}: the provider changed")
    joined = b"".join(blob[4:] for blob in blobs)
    return np.frombuffer(joined, dtype=_HALF).astype(np.float32).reshape(len(blobs), width)


# -- search -------------------------------------------------------------------------------------------------------


def scope_filter(scope: Scope, alias: str = "v") -> tuple[sql.Composable, dict[str, list[str] | list[int]]]:
    """A WHERE condition selecting the scope's rows of a table with ``agent_id`` and ``session_rowid`` columns
    (this table, or ``messages``) as ``Scope.contains`` decides, and its named parameters: arrays, so the
    statement's text is one for every scope of a shape."""
    table = sql.Identifier(alias)
    parts: list[sql.Composable] = []
    params: dict[str, list[str] | list[int]] = {}
    if scope.agent_ids:
        parts.append(
            sql.SQL(
                "({t}.agent_id = ANY(%(agents)s::text[]) AND NOT {t}.session_rowid = ANY(%(excluded)s::bigint[]))"
            ).format(t=table)
        )
        params |= {"agents": sorted(scope.agent_ids), "excluded": sorted(scope.excluded)}
    if scope.session_rowids:
        parts.append(sql.SQL("{t}.session_rowid = ANY(%(sessions)s::bigint[])").format(t=table))
        params["sessions"] = sorted(scope.session_rowids)
    if not parts:
        return sql.SQL("false"), params
    return sql.SQL("({})").format(sql.SQL(" OR ").join(parts)), params


def nearest(conn: Connection, query: npt.NDArray[np.float32], scope: Scope, k: int) -> list[tuple[int, float]]:
    """The ``k`` messages in ``scope`` whose vectors are nearest ``query`` by cosine, best first, each with its
    cosine similarity."""
    query = np.asarray(query, dtype=np.float32).ravel()
    ((ids, rows),) = nearest_many(conn, query.reshape(1, -1), scope, k)
    norms = np.linalg.norm(rows, axis=1) * max(float(np.linalg.norm(query)), 1e-12)
    cosines = (rows @ query) / np.maximum(norms, 1e-12)
    return [(ident, float(cosine)) for ident, cosine in zip(ids, cosines, strict=True)]


Found = tuple[list[int], npt.NDArray[np.float32]]  # message ids, best first, and their stored vectors


def nearest_many(
    conn: Connection,
    queries: npt.NDArray[np.float32],
    scope: Scope,
    k: int,
    later_share: float = 1.0,
    small: bool | None = None,
) -> list[Found]:
    """For each query (a row), its ``k`` nearest messages in ``scope``, best first, with their stored vectors;
    the queries after the first read ``later_share`` of the lists the first reads (rounded up). ``small``:
    whether the scope holds at most ``EXACT_ROWS`` messages (``scope_is_small``), counted here when None.

    One transaction on ``conn`` for them all, for its ``SET LOCAL`` settings (a read connection is in
    autocommit; on a connection already inside a transaction they last until that one ends). The statements
    are never prepared: each is planned for its own scope's arrays, where a prepared statement's generic
    plan, estimated for any agent, could scan every message for an agent holding a hundred.
    """
    queries = np.asarray(queries, dtype=np.float32)
    if k <= 0 or not len(queries):
        return [([], np.zeros((0, queries.shape[1]), dtype=np.float32)) for _ in queries]
    condition, params = scope_filter(scope, "v")
    on_messages, _ = scope_filter(scope, "m")
    approximate = _ANN.format(table=sql.Identifier(TABLE), scope=condition)
    exact = _EXACT.format(table=sql.Identifier(TABLE), scope=on_messages)
    found: list[Found] = []
    with conn.transaction(), conn.cursor(binary=True) as cursor:
        if small is None:
            small = _at_most(cursor, scope, EXACT_ROWS)
        probes = None if small else _read_lists(cursor)
        for n, query in enumerate(queries):
            if n == 1 and probes is not None:  # the later queries read a share of the first's lists
                cursor.execute(_LATER, (str(max(1, math.ceil(probes * later_share))),))
            asked = {**params, "q": query.tolist(), "k": k, "fetch": k * OVERFETCH}
            rows = [] if small else cursor.execute(approximate, asked, prepare=False).fetchall()
            if len(rows) < k:  # a small scope, or one the scan gave up on: ranked whole
                rows = cursor.execute(exact, asked, prepare=False).fetchall()
            found.append(([int(r[0]) for r in rows], _halves([r[1] for r in rows], len(query))))
    return found


def _read_lists(cursor: Cursor[Any]) -> int:
    """Set the scan's settings for this transaction (``_SETTINGS``); returns the lists a search reads."""
    row = cursor.execute(
        _SETTINGS, {"probes": PROBES, "read": READ_VECTORS, "max": str(MAX_PROBES), "index": INDEX}
    ).fetchone()
    assert row is not None  # one row: the settings are read from a one-row join
    return int(row[0])


def scope_is_small(conn: Connection, scope: Scope) -> bool:
    """Whether ``scope`` holds at most ``EXACT_ROWS`` messages, so that its searches are ranked whole."""
    with conn.cursor() as cursor:
        return _at_most(cursor, scope, EXACT_ROWS)


def _at_most(cursor: Cursor[Any], scope: Scope, limit: int) -> bool:
    """Whether the scope holds at most ``limit`` messages, from an upper bound: the agents' messages (their
    excluded sessions' too) plus the extra sessions', each counted up to ``limit + 1`` at most by an
    index-only scan of ``messages_by_agent`` or ``messages_by_session``. So a large scope costs no more to
    ask about than a small one (the exact condition, excluded sessions and all, had the planner read the
    messages' rows themselves, text and all, until it had counted enough)."""
    total = 0
    for column, cast, values in (
        ("agent_id", "text", scope.agent_ids),
        ("session_rowid", "bigint", scope.session_rowids),
    ):
        if values:
            statement = f"SELECT count(*) FROM (SELECT 1 FROM messages WHERE {column} = ANY(%s::{cast}[]) LIMIT %s) s"
            row = cursor.execute(statement, (sorted(values), limit + 1), prepare=False).fetchone()
            total += 0 if row is None else int(row[0])
    return total <= limit


# ``SET LOCAL`` of the scan's settings, as one statement with parameters. The lists read: enough for
# ``READ_VECTORS`` at the rows a list held when the index was made (``_MADE``), at least ``PROBES``, at most
# every list; ``PROBES`` without a valid index.
_SETTINGS = (
    "SELECT set_config('ivfflat.probes', greatest(%(probes)s,"
    " least(i.lists, ceil(%(read)s::float8 * i.lists / nullif(i.made_for, 0))))::int::text, true),"
    " set_config('ivfflat.iterative_scan', 'relaxed_order', true),"
    f" set_config('ivfflat.max_probes', %(max)s, true) FROM (SELECT 1) one LEFT JOIN ({_MADE}) i ON true"
)
_LATER = "SELECT set_config('ivfflat.probes', %s, true)"  # the lists read for the queries after the first
# The index's candidates in scope (in relaxed order), then the best ``k`` of them by their exact distance.
_ANN = sql.SQL(
    "SELECT message_id, embedding FROM (SELECT v.message_id, v.embedding,"
    " v.embedding <=> %(q)s::real[]::halfvec AS distance FROM {table} v WHERE {scope}"
    " ORDER BY v.embedding <=> %(q)s::real[]::halfvec LIMIT %(fetch)s) c ORDER BY distance, message_id LIMIT %(k)s"
)
# Every vector of the scope, exactly: its messages through ``messages``' indexes (by agent, by session), each
# vector found by its key and its distance taken; the best ``k`` then fetched again with their vectors (the
# distances alone are materialized, not 15,000 vectors). Materialized, so the planner cannot order by the
# IVFFlat index instead: an index scan reads only the nearest lists before the scope's filter (and without
# the iterative scan's settings, which this path leaves unset). For scopes too small for the index.
_EXACT = sql.SQL(
    "WITH scoped AS MATERIALIZED (SELECT v.message_id, v.embedding <=> %(q)s::real[]::halfvec AS distance"
    " FROM messages m JOIN {table} v ON v.message_id = m.id WHERE {scope})"
    " SELECT b.message_id, v.embedding FROM (SELECT message_id, distance FROM scoped"
    " ORDER BY distance, message_id LIMIT %(k)s) b JOIN {table} v ON v.message_id = b.message_id"
    " ORDER BY b.distance, b.message_id"
)
