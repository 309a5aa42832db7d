"""What the PostgreSQL backend will stand on, checked on the real server: pgvector's halfvec type and HNSW
index answer an agent-scoped nearest-neighbour query through a psycopg 3 connection pool."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from pgvector.psycopg import register_vector
from psycopg import Connection
from psycopg_pool import ConnectionPool

from tests.postgres.conftest import Database

DIMENSION = 384  # the local model's
OTHER_ROWS = 300  # another agent's messages, all about the query's subject
MAIN_ROWS = 100  # the asking agent's, about anything


def unit(vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    normed: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=-1, keepdims=True)
    return normed


def exact_nearest(vectors: npt.NDArray[np.float32], query: npt.NDArray[np.float32], ids: range, k: int) -> list[int]:
    """Exact cosine ranking of ``ids`` on the vectors as halfvec holds them (float16)."""
    stored = unit(vectors[list(ids)].astype(np.float16).astype(np.float32))
    order = np.argsort(-(stored @ unit(query)), kind="stable")[:k]
    return [ids[int(i)] for i in order]


def test_hnsw_halfvec_finds_the_agents_nearest_message_through_a_pool(postgres_database: Database) -> None:
    rng = np.random.default_rng(7)
    subject = unit(rng.standard_normal(DIMENSION).astype(np.float32))
    others = unit(subject + 0.08 * rng.standard_normal((OTHER_ROWS, DIMENSION)).astype(np.float32))
    vectors = np.vstack([others, unit(rng.standard_normal((MAIN_ROWS, DIMENSION)).astype(np.float32))])
    other_ids, main_ids = range(OTHER_ROWS), range(OTHER_ROWS, OTHER_ROWS + MAIN_ROWS)
    with Connection.connect(postgres_database.conninfo, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    with ConnectionPool(postgres_database.conninfo, min_size=1, max_size=2, configure=register_vector) as pool:
        with pool.connection() as conn:
            conn.execute(f"CREATE TABLE message_vectors (message_id bigint PRIMARY KEY, agent text NOT NULL,"
                         f" embedding halfvec({DIMENSION}) NOT NULL)")  # fmt: skip
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO message_vectors VALUES (%s, %s, %s::halfvec)",
                    [(i, "other" if i in other_ids else "main", vectors[i]) for i in range(len(vectors))],
                )
            conn.execute("CREATE INDEX ON message_vectors USING hnsw (embedding halfvec_cosine_ops)")

        # Every one of the other agent's messages is nearer the query than any of main's: the index's first
        # candidates all belong to the other agent, and main's answer lies past them.
        with pool.connection() as conn:
            conn.execute("SET enable_seqscan = off")  # the index must answer, as it will at 1M rows
            conn.execute("SET hnsw.iterative_scan = strict_order")  # keep scanning past the other agent's rows
            knn = ("SELECT message_id FROM message_vectors WHERE agent = %s"
                   " ORDER BY embedding <=> %s::halfvec LIMIT 3")  # fmt: skip
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + knn, ("main", subject)).fetchall())
            nearest_of_main = [row[0] for row in conn.execute(knn, ("main", subject)).fetchall()]
            nearest_of_other = [row[0] for row in conn.execute(knn, ("other", subject)).fetchall()]

    assert "message_vectors_embedding_idx" in plan
    assert nearest_of_main == exact_nearest(vectors, subject, main_ids, 3)
    assert nearest_of_other == exact_nearest(vectors, subject, other_ids, 3)
