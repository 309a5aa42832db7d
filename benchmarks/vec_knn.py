"""sqlite-vec's own KNN against the sidecar's in-memory index, on the same vectors.

The question (issue: "the vectors are a sqlite-vec table again"): now that ``message_vectors`` is a ``vec0``
table, could the turn's vector lane search it with SQL instead of keeping an index in RAM? Measured, for a
top-100 query (what ``assemble`` asks the vector lane for) on N vectors:

- ``vec0 int8 exact``: ``embedding MATCH vec_int8(?) AND k = 100`` on the product's table as it is;
- ``vec0 bit+int8 (S)``: a ``bit[384]`` column beside the codes (48 more bytes a message, which the product
  does not store), ``bits MATCH ? AND k = S`` for a shortlist of S, re-scored by the int8 codes' cosine and cut
  to 100, all in one SQL statement (the vec0 KNN returns each row's codes with it: no lookup per row);
- ``in-memory index``: ``VectorIndex.search`` (sign-bit shortlist, int8 re-scoring, numpy), as the sidecar runs
  it, loaded from the same table.

For each: latency p50/p95 over the queries, and the share of the exact float32 top-20 it returns. Vectors as
in the scale benchmark: the real local model's for the first ``--sample`` synthetic messages, stand-ins (mixes
of two real vectors plus noise) for the rest; queries are the real model's vectors of synthetic prompts.
One agent, so the scope is every vector. Timings are recorded, never asserted; on a shared machine compare
the figures of one run with each other, not with another run's.

    python benchmarks/vec_knn.py --messages 100000
    python benchmarks/vec_knn.py --quick        # 5,000 vectors: a smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import machine, scale_data  # noqa: E402
from benchmarks.harness import percentile  # noqa: E402
from benchmarks.scale_data import AGENT, ChatGenerator  # noqa: E402
from openclaw_lossless.config import Settings  # noqa: E402
from openclaw_lossless.embed.index import VectorIndex  # noqa: E402
from openclaw_lossless.embed.provider import Vectors  # noqa: E402
from openclaw_lossless.store import quantize  # noqa: E402
from openclaw_lossless.store.backend import SQLITE  # noqa: E402
from openclaw_lossless.store.model.sessions import Scope  # noqa: E402
from openclaw_lossless.store.sqlite import vectors as stored  # noqa: E402
from openclaw_lossless.store.sqlite.connection import Connection, open_connection  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
K = 100
SHORTLISTS = (400, 1000, 4000)


def build(path: Path, vectors: Vectors, with_bits: bool) -> Connection:
    """The product's ``vec0`` table (``store.vectors.create``), optionally with a ``bit[N]`` column added."""
    conn = open_connection(path, synchronous="OFF")
    dimension = vectors.shape[1]
    if with_bits:
        conn.execute(
            f"CREATE VIRTUAL TABLE {stored.TABLE} USING vec0(message_id INTEGER PRIMARY KEY,"
            f" embedding int8[{dimension}] distance_metric=cosine, bits bit[{dimension}],"
            " session_rowid INTEGER, scale FLOAT)"
        )
    else:
        stored.create(conn, dimension)
    codes, scales = quantize.quantize(vectors)
    columns = "message_id, embedding, session_rowid, scale" + (", bits" if with_bits else "")
    values = "?1, vec_int8(?2), ?3, ?4" + (", vec_quantize_binary(vec_int8(?2))" if with_bits else "")  # its bit order
    conn.execute("BEGIN")
    for start in range(0, len(vectors), 20000):
        rows = [
            (i + 1, codes[i].tobytes(), 1 + i // 200, float(scales[i]))
            for i in range(start, min(start + 20000, len(vectors)))
        ]
        conn.executemany(f"INSERT INTO {stored.TABLE} ({columns}) VALUES ({values})", rows)
    # the index maps each session to its agent when it loads: one agent, as in the scale benchmark
    conn.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, agent_id TEXT NOT NULL)")
    conn.executemany("INSERT INTO sessions VALUES (?, ?)", [(s, AGENT) for s in range(1, len(vectors) // 200 + 2)])
    conn.execute("COMMIT")
    return conn


def vector_bytes(conn: Connection, count: int) -> int:
    """Bytes a message the vector table and its shadow tables take (``dbstat``)."""
    size = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'message_vectors%'").fetchone()[0]
    return round(int(size) / count)


def exact_top(vectors: Vectors, query: Vectors, k: int) -> list[int]:
    scores = vectors @ query
    top = np.argpartition(-scores, k)[:k]
    return [int(i) + 1 for i in top[np.argsort(-scores[top])]]


def int8_exact(conn: Connection) -> Callable[[Vectors], list[int]]:
    def search(query: Vectors) -> list[int]:
        codes, _ = quantize.quantize(query.reshape(1, -1))
        rows = conn.execute(
            f"SELECT message_id FROM {stored.TABLE} WHERE embedding MATCH vec_int8(?) AND k = ? ORDER BY distance",
            (codes[0].tobytes(), K),
        ).fetchall()
        return [int(r[0]) for r in rows]

    return search


def bit_then_int8(conn: Connection, shortlist: int) -> Callable[[Vectors], list[int]]:
    def search(query: Vectors) -> list[int]:
        codes, _ = quantize.quantize(query.reshape(1, -1))
        rows = conn.execute(
            "SELECT message_id FROM (SELECT message_id, embedding FROM message_vectors"
            "  WHERE bits MATCH vec_quantize_binary(vec_int8(?1)) AND k = ?2)"
            " ORDER BY vec_distance_cosine(vec_int8(embedding), vec_int8(?1)) LIMIT ?3",
            (codes[0].tobytes(), shortlist, K),
        ).fetchall()
        return [int(r[0]) for r in rows]

    return search


def in_memory(conn: Connection, dimension: int) -> tuple[Callable[[Vectors], list[int]], float]:
    index = VectorIndex(dimension)
    began = time.perf_counter()
    index.load(SQLITE, conn)
    loaded_s = time.perf_counter() - began
    scope = Scope(agent_ids=frozenset({AGENT}))
    return (lambda query: [i for i, _ in index.search(query, scope, K)]), loaded_s


def measure(search: Callable[[Vectors], list[int]], queries: Vectors, truth: list[list[int]]) -> dict[str, Any]:
    for query in queries[:3]:  # warm the page cache and the code paths
        search(query)
    times, overlaps = [], []
    for query, exact in zip(queries, truth, strict=True):
        began = time.perf_counter()
        found = search(query)
        times.append((time.perf_counter() - began) * 1000)
        overlaps.append(len(set(found[:20]) & set(exact[:20])) / 20)
    return {
        "p50_ms": round(percentile(times, 50, interpolate=True), 2),
        "p95_ms": round(percentile(times, 95, interpolate=True), 2),
        "top20_overlap": round(float(np.mean(overlaps)), 4),
        "queries": len(queries),
    }


def embed(texts: list[str]) -> Vectors:
    from openclaw_lossless.embed.service import build_provider

    provider = build_provider(Settings())
    try:
        return np.concatenate([provider.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    finally:
        provider.close()


def run(size: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    real = embed(scale_data.sample_texts(args.sample))
    generator = ChatGenerator(seed=size + 11)
    queries = embed([generator.prompt() for _ in range(args.queries)])
    rng = np.random.default_rng(6)
    vectors = np.concatenate([real[:size], scale_data.stand_in_vectors(real, max(0, size - len(real)), rng)])
    truth = [exact_top(vectors, q, K) for q in queries]
    product = build(work / "product.sqlite", vectors, with_bits=False)
    with_bits = build(work / "bits.sqlite", vectors, with_bits=True)
    try:
        memory, loaded_s = in_memory(product, vectors.shape[1])
        result: dict[str, Any] = {
            "messages": size,
            "bytes_per_message": {"product": vector_bytes(product, size), "with_bits": vector_bytes(with_bits, size)},
            "index_load_s": round(loaded_s, 3),
            "in_memory_index": measure(memory, queries, truth),
            "vec0_int8_exact": measure(int8_exact(product), queries, truth),
        }
        for shortlist in SHORTLISTS:
            result[f"vec0_bit_then_int8_{shortlist}"] = measure(bit_then_int8(with_bits, shortlist), queries, truth)
        result["load_average"] = [round(x, 2) for x in os.getloadavg()]
        return result
    finally:
        product.close()
        with_bits.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", default="100000", help="vector counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="5,000 vectors, 20 queries: a smoke run")
    parser.add_argument("--sample", type=int, default=1500, help="vectors from the real model")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--out", type=Path, default=None, help="JSON file for the results (default: print only)")
    args = parser.parse_args(argv)
    sizes = [5000] if args.quick else [int(s) for s in args.messages.split(",")]
    if args.quick:
        args.queries, args.sample = 20, 300
    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="vec-knn-") as work:
            results.append(run(size, args, Path(work)))
        print(json.dumps(results[-1]), flush=True)
    report = {
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine.describe(),
        "k": K,
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
