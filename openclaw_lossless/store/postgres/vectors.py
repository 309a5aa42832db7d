"""The message vectors on PostgreSQL: ``halfvec(N)`` rows with an HNSW index (cosine), searched in the database.

The SQLite store keeps int8 codes with a per-vector scale in a ``vec0`` table and searches a copy of them held
in each sidecar's memory (``embed/index.py``). Here several sidecars share one store, and a copy per process
would miss every other sidecar's vectors until reloaded, so the search runs in the database (``nearest``): a
vector one sidecar writes is found by every other as soon as its transaction commits. The callers still hand
over int8 codes and scales (``api.Vectors.write``, what ``embed/index.store_vectors`` makes); a row stores
``code × scale`` as half floats, the vector SQLite holds, to within half precision (relative error ~5e-4 of
a component, far below the int8 rounding itself). ``read_all`` turns the rows back into codes and scales.

Each row carries its message's agent and session, copied from ``messages`` at write, so the agent's scope
(``Scope``, rendered here by ``scope_filter``) filters the index scan without a join. The row goes with its
message (``ON DELETE CASCADE``): a forgotten or archived message has no vector in the same transaction.

Search (``nearest_many``) takes one of two paths, by the scope's size (counted up to ``EXACT_ROWS`` + 1 at
most, through the messages' indexes):

- a scope of at most ``EXACT_ROWS`` messages (a subagent's sessions, an agent's first months) is ranked
  whole and exactly: the distance of each of its vectors, found by key from its messages;
- a larger one through the HNSW index under the scope's filter, with pgvector 0.8's iterative scan
  (``hnsw.iterative_scan = relaxed_order``): when the first ``ef_search`` candidates hold too few of the
  scope's rows, the scan goes on through the graph until it has ``OVERFETCH × k`` of them; relaxed order
  may hand them over slightly out of order, so they are sorted again by their exact (half precision)
  distance and the best ``k`` kept. Should the scan stop short (``hnsw.max_scan_tuples``), the exact path
  answers.

Why two paths: a filtered HNSW scan loses the neighbours a selective filter leaves far apart in the graph.
Measured with stand-in vectors (``benchmarks/scale_data.stand_in_vectors``: mixes of real all-MiniLM-L6-v2
vectors), 25-40 real prompt embeddings, six agents holding 40/25/15/10/7/3 % of the rows, top-20 overlap
with exact search under the same filter, on a loaded 2-core machine over a Unix socket:

- 60,000 vectors, a graph built with m = 16, ef_construction = 64 (pgvector's defaults), through the index:
  ``ef_search`` 400 gives 0.992 unfiltered, 0.972 for the 40 % agent, 0.91 for the 3 % one (no better at
  800); with ef_construction = 200 (m003's and ``create``'s) 0.980 and 0.953. With both paths, 1.0 for every
  scope ranked whole and 0.998 over eight scopes (the agents, a subagent's, a session-mode one);
- 200,000 vectors through the index, ``ef_search`` 600 / 1000 (pgvector's largest): with ef_construction
  = 64, 0.94 / 0.958 for the 40 % agent and 0.90 / 0.936 for the 10 % one; with 200, 0.982 / 0.990 and
  0.966 / 0.986, p50 ~25-55 ms (hence ``EF_SEARCH`` 1000);
- ranked whole: p50 20-60 ms at 60,000, 30-60 ms at 200,000 (14,000 rows; the vectors read by key);
- as it stands, 200,000 vectors, 30 queries: every agent 0.988-0.995 through the index (p50 19-31 ms),
  1.0 ranked whole; 0.996 over the eight scopes.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from psycopg import Cursor, sql

from openclaw_lossless.store import quantize
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.sqlite.sessions import Scope
from openclaw_lossless.store.sqlite.vectors import StoredVectors

TABLE = "message_vectors"
INDEX = "message_vectors_hnsw"
HNSW_M = 16  # the graph's links per node, as migration m003 builds it
HNSW_EF_CONSTRUCTION = 200  # a better graph for filtered scans (the 3 % agent 0.913 -> 0.953 at 60k), inserts ~2x
EF_SEARCH = 1000  # the scan's candidates, pgvector's largest (its default 40 finds 0.73 of the top 20; see above)
MAX_SCAN_TUPLES = 40000  # index rows an iterative scan may visit before it stops looking for more in scope
EXACT_ROWS = 20000  # a scope of at most this many messages is ranked whole, exactly (~20-50 ms at 15,000 here)
OVERFETCH = 2  # rows asked of the index per row wanted: relaxed order, then an exact sort of them all
_BLOCK = 10000  # rows per block of ``read_all``: ~8 MB of half floats at 384 dimensions
_HALF = np.dtype(">f2")  # halfvec's binary form: dimension (uint16), unused (uint16), then big-endian halves


def create(conn: Connection, dimension: int) -> None:
    """The empty vector table for ``dimension`` components, and its HNSW index (as migration m003 makes it).

    A copy of the migration's statements, not a call into it: a shipped migration stays as it shipped, while
    this follows the current layout.
    """
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,"
            " agent_id text NOT NULL, session_rowid bigint NOT NULL, embedding halfvec({}) NOT NULL)"
        ).format(sql.Identifier(TABLE), sql.Literal(int(dimension)))
    )
    conn.execute(
        sql.SQL("CREATE INDEX {} ON {} USING hnsw (embedding halfvec_cosine_ops) WITH (m = {}, ef_construction = {})")
        .format(sql.Identifier(INDEX), sql.Identifier(TABLE), sql.Literal(HNSW_M), sql.Literal(HNSW_EF_CONSTRUCTION))
    )  # fmt: skip


def recreate(conn: Connection, dimension: int) -> None:
    """Drop every stored vector and start an empty table and index for ``dimension`` (the provider changed).

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


def nearest_many(conn: Connection, queries: npt.NDArray[np.float32], scope: Scope, k: int) -> list[Found]:
    """For each query (a row), its ``k`` nearest messages in ``scope``, best first, with their stored vectors.

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
        small = _at_most(cursor, scope, EXACT_ROWS)
        if not small:
            cursor.execute(_SETTINGS, (str(EF_SEARCH), str(MAX_SCAN_TUPLES)))
        for query in queries:
            asked = {**params, "q": query.tolist(), "k": k, "fetch": k * OVERFETCH}
            rows = [] if small else cursor.execute(approximate, asked, prepare=False).fetchall()
            if len(rows) < k:  # a small scope, or one the scan gave up on: ranked whole
                rows = cursor.execute(exact, asked, prepare=False).fetchall()
            found.append(([int(r[0]) for r in rows], _halves([r[1] for r in rows], len(query))))
    return found


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


# ``SET LOCAL`` of the scan's settings, as one statement with parameters.
_SETTINGS = (
    "SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true), set_config('hnsw.ef_search', %s, true),"
    " set_config('hnsw.max_scan_tuples', %s, true)"
)
# The index's candidates in scope (in relaxed order), then the best ``k`` of them by their exact distance.
_ANN = sql.SQL(
    "SELECT message_id, embedding FROM (SELECT v.message_id, v.embedding,"
    " v.embedding <=> %(q)s::real[]::halfvec AS distance FROM {table} v WHERE {scope}"
    " ORDER BY v.embedding <=> %(q)s::real[]::halfvec LIMIT %(fetch)s) c ORDER BY distance, message_id LIMIT %(k)s"
)
# Every vector of the scope, exactly: its messages through ``messages``' indexes (by agent, by session), each
# vector found by its key and its distance taken; the best ``k`` then fetched again with their vectors (the
# distances alone are materialized, not 15,000 vectors). Materialized, so the planner cannot order by the
# HNSW index instead: an index scan ranks only ``ef_search`` candidates before the scope's filter (and
# without the iterative scan's settings, which this path leaves unset). For scopes too small for the index.
_EXACT = sql.SQL(
    "WITH scoped AS MATERIALIZED (SELECT v.message_id, v.embedding <=> %(q)s::real[]::halfvec AS distance"
    " FROM messages m JOIN {table} v ON v.message_id = m.id WHERE {scope})"
    " SELECT b.message_id, v.embedding FROM (SELECT message_id, distance FROM scoped"
    " ORDER BY distance, message_id LIMIT %(k)s) b JOIN {table} v ON v.message_id = b.message_id"
    " ORDER BY b.distance, b.message_id"
)
