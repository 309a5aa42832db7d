"""The scale benchmark's in-process measurements of one filled store, and the seed's design beside them.

Each function times or sizes one thing through the product's own code (``Sidecar``, ``VectorIndex``,
``keyword_search``) on the store ``scale_data.fill`` made; the seed's float32 ``vec0`` full scan stands in as
the vector lane (``Vec0Lane``) where the baseline is measured. ``scale.py`` runs them size by size.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, cast

import numpy as np

from benchmarks.harness import percentile
from benchmarks.scale_data import AGENT, ChatGenerator, Message, agent_message
from openclaw_lossless.capture.token_estimate import estimate_tokens
from openclaw_lossless.embed.index import VectorIndex
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.recall.assemble import Assembler
from openclaw_lossless.recall.search import keyword_search
from openclaw_lossless.recall.window import Descriptor
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import SQLITE
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.sqlite.connection import Connection, Database


class Vec0Lane:
    """The seed's vector lane: a float32 ``vec0`` full scan (same interface as ``VectorIndex``)."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def search(self, query: Vectors, scope: Scope, k: int) -> list[tuple[int, float]]:
        rows = self.conn.execute(
            "SELECT message_id, distance FROM baseline WHERE embedding MATCH ? AND k = ?",
            (np.asarray(query, dtype=np.float32).tobytes(), k),
        ).fetchall()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    def vector(self, message_id: int) -> Vectors | None:
        row = self.conn.execute("SELECT embedding FROM baseline WHERE message_id = ?", (message_id,)).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    def vectors(self, message_ids: list[int]) -> tuple[list[int], Vectors]:
        """``VectorIndex.vectors``: those of ``message_ids`` the table holds, and their vectors."""
        held = [(i, vector) for i in message_ids if (vector := self.vector(i)) is not None]
        if not held:
            row = self.conn.execute("SELECT embedding FROM baseline LIMIT 1").fetchone()
            return [], np.zeros((0, 0 if row is None else len(row[0]) // 4), dtype=np.float32)
        return [i for i, _ in held], np.stack([vector for _, vector in held])

    def search_many(self, queries: Vectors, scope: Scope, k: int) -> list[tuple[int, Vectors]]:
        """``VectorIndex.search_many`` by exact scans: each query's ``k`` nearest, with the cosine to every query."""
        rows = np.asarray(queries, dtype=np.float32).reshape(len(queries), -1)
        found = dict.fromkeys(i for query in rows for i, _ in self.search(query, scope, k))
        scored = [(i, rows @ vector) for i in found if (vector := self.vector(i)) is not None]
        return sorted(scored, key=lambda item: -float(item[1][0]))


def percentiles(samples_s: list[float]) -> dict[str, float]:
    """p50/p95/p99 in ms (interpolated, as the product's ``/stats``) and the count of the samples."""
    ms = [s * 1000 for s in samples_s]
    return {f"p{q}": round(percentile(ms, q, interpolate=True), 2) for q in (50, 95, 99)} | {"n": len(samples_s)}


WARMUP = 3  # calls made before timing: caches, the first query plans


def timed(calls: list[Callable[[], object]], warmup: int = WARMUP) -> list[float]:
    for call in calls[:warmup]:
        call()
    out = []
    for call in calls[warmup:]:
        began = time.perf_counter()
        call()
        out.append(time.perf_counter() - began)
    return out


def host_history(generator: ChatGenerator, count: int = 200) -> list[dict[str, Any]]:
    """What the shim sends: compact descriptors of the host's last ``count`` messages."""
    out: list[dict[str, Any]] = []
    for _, batch in generator.sessions(count):
        for n, m in enumerate(batch):
            text = m.text if m.role == "user" else None
            out.append({"role": m.role, "key": f"h{n:04d}", "tokens": estimate_tokens(m.text) + 4, "text": text})
    return out[:count]


def measure_assemble(sidecar: Sidecar, prompts: list[str], history: list[dict[str, Any]]) -> dict[str, Any]:
    descriptors = [Descriptor(d["role"], d["key"], d["tokens"], None, d["text"]) for d in history]
    recall = sidecar.settings.recall

    phases: dict[str, list[float]] = {}

    def one(prompt: str) -> Callable[[], object]:
        def call() -> None:
            result = sidecar.queries.assemble("bench-live", f"agent:{AGENT}:live", descriptors, prompt, None, recall)
            for phase, ms in result.phases.items():
                phases.setdefault(phase, []).append(ms / 1000)

        return call

    timings = percentiles(timed([one(p) for p in prompts], warmup=WARMUP))
    # Each phase's own percentiles, warm-up left out as above: where the time after the lanes goes.
    return timings | {"phases": {phase: percentiles(samples[WARMUP:]) for phase, samples in phases.items()}}


def measure_lanes(sidecar: Sidecar, prompts: list[str]) -> dict[str, Any]:
    """The vector and keyword lanes alone, on fresh prompts: where the assemble time goes."""
    assert sidecar.index is not None and sidecar.embedding.provider is not None
    index, provider, conn = sidecar.index, sidecar.embedding.provider, sidecar.db.reader()
    scope = Scope(agent_ids=frozenset({AGENT}))
    vectors = provider.embed(prompts)
    deadline = time.monotonic() + 3600
    terms = sidecar.assembler.terms  # as assemble runs it, with the term limit
    fulltext = sidecar.ops.fulltext
    return {
        "query_embed": percentiles(timed([functools.partial(provider.embed, [p]) for p in prompts])),
        "vector": percentiles(timed([functools.partial(index.search, v, scope, 100) for v in vectors])),
        "keyword": percentiles(
            timed([functools.partial(keyword_search, conn, fulltext, p, scope, 100, deadline, terms) for p in prompts])
        ),
    }


def measure_overlap(sidecar: Sidecar, baseline: Connection, prompts: list[str]) -> dict[str, Any]:
    """How much of the exact float32 top-k (the vec0 scan) the product's vector search returns."""
    assert sidecar.index is not None and sidecar.embedding.provider is not None
    exact = Vec0Lane(baseline)
    scope = Scope(agent_ids=frozenset({AGENT}))
    out: dict[str, Any] = {}
    vectors = sidecar.embedding.provider.embed(prompts)
    for k in (20, 100):
        shares = []
        for vector in vectors:
            truth = {i for i, _ in exact.search(vector, scope, k)}
            found = {i for i, _ in sidecar.index.search(vector, scope, k)}
            shares.append(len(truth & found) / max(1, len(truth)))
        out[f"top{k}"] = {"mean": round(float(np.mean(shares)), 4), "min": round(float(np.min(shares)), 4)}
    if isinstance(sidecar.index, VectorIndex):  # the SQLite store's copy; PostgreSQL's search has no shortlist
        out["shortlist_sweep"] = shortlist_sweep(sidecar.index, exact, vectors, scope)
    return out


def shortlist_sweep(index: VectorIndex, exact: Vec0Lane, vectors: Vectors, scope: Scope) -> dict[str, Any]:
    """Top-20 overlap and vector-lane time for fixed shortlist sizes (the share that grows it with the scope
    turned off): the trade-off ``vector_shortlist`` and ``SHORTLIST_SHARE`` set."""
    truths = [{i for i, _ in exact.search(v, scope, 20)} for v in vectors]
    default, share, out = index.shortlist, index.share, {}
    index.share = 0.0
    try:
        for size in (2000, 10000, 30000, 40000):
            index.shortlist = size
            shares, times = [], []
            for vector, truth in zip(vectors, truths, strict=True):
                began = time.perf_counter()
                found = {i for i, _ in index.search(vector, scope, 20)}
                times.append(time.perf_counter() - began)
                shares.append(len(truth & found) / max(1, len(truth)))
            out[str(size)] = {"top20": round(float(np.mean(shares)), 4), "p50_ms": percentiles(times)["p50"]}
    finally:
        index.shortlist, index.share = default, share
    return out


def measure_baseline(sidecar: Sidecar, baseline: Connection, prompts: list[str]) -> Any:
    """The seed's design on the same data: the vec0 scan alone, and as the vector lane of the same assemble."""
    assert sidecar.embedding.provider is not None
    lane = Vec0Lane(baseline)
    scope = Scope(agent_ids=frozenset({AGENT}))
    vectors = sidecar.embedding.provider.embed(prompts)
    scan = percentiles(timed([functools.partial(lane.search, v, scope, 20) for v in vectors], warmup=1))
    product_assembler = sidecar.queries.assembler
    # the same code, vec0 as the lane
    sidecar.queries.assembler = Assembler(sidecar.ops, cast(VectorIndex, lane), sidecar.embedding)
    try:
        assemble = measure_assemble(sidecar, prompts, [])
    finally:
        sidecar.queries.assembler = product_assembler
    return {"vec0_scan_top20": scan, "assemble": assemble}


def measure_drain(sidecar: Sidecar, generator: ChatGenerator, count: int) -> dict[str, Any]:
    """Queue ``count`` ~100-word messages and time the worker's batches until the backlog is empty."""
    assert sidecar.worker is not None
    now_ms = int(time.time() * 1000)
    raw = [
        agent_message(Message("assistant", generator.words(100, ["ml", "deploy"]), now_ms + n)) for n in range(count)
    ]
    for start in range(0, count, 4):
        sidecar.ingest.commit_turn(
            f"drain-{start}", "bench-drain", f"agent:{AGENT}:drain", raw[start : start + 4],
            heartbeat=False, recall=sidecar.settings.recall,
        )  # fmt: skip
    began, embedded = time.perf_counter(), 0
    while done := sidecar.worker.drain_once():
        embedded += done
    seconds = time.perf_counter() - began
    return {"messages": embedded, "seconds": round(seconds, 2), "msg_per_s": round(embedded / seconds, 1)}


def measure_commits(sidecar: Sidecar, generator: ChatGenerator, turns: int, sustain_s: float) -> dict[str, Any]:
    recall = sidecar.settings.recall
    counter = iter(range(10**9))

    def one() -> None:
        n = next(counter)
        now_ms = int(time.time() * 1000)
        raw = [
            agent_message(Message(role, generator.words(generator.length(role), ["car"]), now_ms + j))
            for j, role in enumerate(("user", "assistant", "user", "assistant"))
        ]
        sidecar.ingest.commit_turn(f"c-{n}", f"bench-commit-{n // 50}", f"agent:{AGENT}:c{n // 50}", raw,
                            heartbeat=False, recall=recall)  # fmt: skip

    latency = percentiles(timed([one] * (turns + 3)))
    began, done = time.perf_counter(), 0
    while time.perf_counter() - began < sustain_s:
        one()
        done += 1
    per_s = done / (time.perf_counter() - began)
    vectors_for_backlog(sidecar)
    return {"latency": latency, "sustained_per_s": round(per_s, 1)}


def vectors_for_backlog(sidecar: Sidecar) -> None:
    """Give the probe turns stand-in vectors so the server's worker does not compete with what we time next."""
    assert sidecar.index is not None
    conn = sidecar.db.reader()
    rows = conn.execute(
        "SELECT b.message_id, m.session_rowid FROM embedding_backlog b JOIN messages m ON m.id = b.message_id"
    ).fetchall()
    if rows:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((len(rows), sidecar.index.dimension)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        from openclaw_lossless.embed.index import store_vectors

        sidecar.db.write(lambda c: store_vectors(sidecar.ops, c, [r[0] for r in rows], vectors, [r[1] for r in rows]))


def measure_size(db: Database, messages: int) -> dict[str, Any]:
    with db.writer() as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn = db.reader()
    text = int(conn.execute("SELECT sum(length(CAST(text AS BLOB))) FROM messages").fetchone()[0])
    total = os.stat(db.path).st_size
    split: dict[str, int] = {}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        group = "fts" if "fts" in name else ("vectors" if "vector" in name else str(name))
        split[group] = split.get(group, 0) + int(size)
    return {
        "file_bytes": total,
        "text_bytes": text,
        "bytes_per_message": round(total / messages),
        "beyond_text_per_message": round((total - text) / messages),
        "per_message_by_table": {k: round(v / messages) for k, v in sorted(split.items(), key=lambda kv: -kv[1])},
    }


def keyword_statement(conn: Connection, scope: Scope) -> str:
    """The keyword lane's ranking statement exactly as the product runs it (parameters filled in)."""
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        keyword_search(conn, SQLITE.fulltext, "helm", scope, 100, time.monotonic() + 60)
    finally:
        conn.set_trace_callback(None)
    return next(sql for sql in statements if "bm25(" in sql)


def query_plans(conn: Connection) -> dict[str, list[str]]:
    """EXPLAIN QUERY PLAN of the turn's queries: none may scan a table that grows with history."""
    scope = Scope(agent_ids=frozenset({AGENT}))
    queries = {
        "keyword": (keyword_statement(conn, scope), []),
        "fetch": ("SELECT id, text FROM messages m WHERE m.id IN (?, ?)", [1, 2]),
        "term_probe": (
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT 1 OFFSET ?",
            ['"helm"', 20000],
        ),
        "commit_duplicate_check": ("SELECT 1 FROM turns WHERE advancement_key = ?", ["k"]),
        "session": ("SELECT id, session_key, agent_id FROM sessions WHERE session_id = ?", ["s"]),
        "parent": ("SELECT parent_session_key FROM subagent_links WHERE child_session_key = ?", ["k"]),
        "backlog_batch": (
            "SELECT b.message_id, m.text FROM embedding_backlog b LEFT JOIN messages m ON m.id = b.message_id"
            " ORDER BY b.message_id LIMIT ?",
            [32],
        ),
    }
    return {
        name: [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", args)]
        for name, (sql, args) in queries.items()
    }
