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
ROWS = 400


def unit_vectors(count: int, seed: int) -> npt.NDArray[np.float32]:
    vectors = np.random.default_rng(seed).standard_normal((count, DIMENSION)).astype(np.float32)
    unit: npt.NDArray[np.float32] = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    return unit


def test_hnsw_halfvec_finds_the_agents_nearest_message_through_a_pool(postgres_database: Database) -> None:
    with Connection.connect(postgres_database.conninfo, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
    with ConnectionPool(postgres_database.conninfo, min_size=1, max_size=2, configure=register_vector) as pool:
        vectors = unit_vectors(ROWS, seed=7)
        with pool.connection() as conn:
            conn.execute(f"CREATE TABLE message_vectors (message_id bigint PRIMARY KEY, agent text NOT NULL,"
                         f" embedding halfvec({DIMENSION}) NOT NULL)")  # fmt: skip
            with conn.cursor() as cursor:
                cursor.executemany(
                    "INSERT INTO message_vectors VALUES (%s, %s, %s::halfvec)",
                    [(i, "main" if i % 2 == 0 else "other", vectors[i]) for i in range(ROWS)],
                )
            conn.execute("CREATE INDEX ON message_vectors USING hnsw (embedding halfvec_cosine_ops)")

        # A query next to message 137 (agent "other") and, a little further, to message 250 (agent "main").
        query = 0.9 * vectors[137] + 0.6 * vectors[250]
        with pool.connection() as conn:
            conn.execute("SET enable_seqscan = off")  # the index must answer, as it will at 1M rows
            conn.execute("SET hnsw.iterative_scan = relaxed_order")  # keep scanning past the other agent's rows
            knn = ("SELECT message_id FROM message_vectors WHERE agent = %s"
                   " ORDER BY embedding <=> %s::halfvec LIMIT 3")  # fmt: skip
            plan = "\n".join(row[0] for row in conn.execute("EXPLAIN " + knn, ("main", query)).fetchall())
            nearest_of_main = [row[0] for row in conn.execute(knn, ("main", query)).fetchall()]
            nearest_of_other = [row[0] for row in conn.execute(knn, ("other", query)).fetchall()]

    assert "message_vectors_embedding_idx" in plan
    assert nearest_of_main[0] == 250
    assert all(message_id % 2 == 0 for message_id in nearest_of_main)
    assert nearest_of_other[0] == 137
