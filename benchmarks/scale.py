"""Speed, size and scale: the turn's costs at 10k, 100k and 1M stored messages, against the seed's design.

For each size a fresh store is bulk-filled with synthetic chat (``scale_data.py``: realistic length spread,
many sessions, one agent; real local-model vectors for a sample, stand-in vectors of the same shape for the
rest), then measured through the product:

- ``assemble`` p50/p95/p99 in the sidecar (``Sidecar.assemble``, query embedding included: every prompt is
  new, so the query cache never answers), with the lanes' own times beside it; once with an empty host window
  (the query is the prompt alone: what grows with history) and once with a 200-message window (the query is
  the prompt plus the window's last three user messages, so its embedding costs more, whatever the history);
- the same over HTTP against a real ``openclaw-lossless serve`` process, with a 200-message host history
  sent as descriptors;
- ``commit-turn`` p50/p95 (4 messages, ``synchronous=FULL``, the default) and sustained commits/s;
- embedding backlog drain rate with the local default on ~100-word messages (the worker's own batches);
- bytes on disk per message beyond its text, with the per-table split (``dbstat``);
- the server's RSS once its index is loaded, and cold start to ``/healthz`` ok and to the index loaded;
- the overlap of the product's vector top-k with the exact float32 top-k (k = 20 and 100);
- the baseline: the seed's float32 ``vec0`` full scan, alone and as the vector lane of the same ``assemble``.

Run from the repository root (the model must be fetched: ``openclaw-lossless model fetch``)::

    python benchmarks/scale.py --messages 10000,100000,1000000
    python benchmarks/scale.py --quick          # 2,000 messages, well under 3 minutes: a CI smoke run

Writes ``benchmarks/results/scale.{json,md,png}`` (``scale-quick.*`` for ``--quick``; the PNG needs matplotlib,
a benchmark-time tool only). Timings are recorded, never asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import httpx
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import machine, scale_data  # noqa: E402
from benchmarks.scale_data import AGENT, ChatGenerator, Message, agent_message  # noqa: E402
from openclaw_lossless.capture.token_estimate import estimate_tokens  # noqa: E402
from openclaw_lossless.config import Settings  # noqa: E402
from openclaw_lossless.embed.index import VectorIndex  # noqa: E402
from openclaw_lossless.embed.provider import Vectors  # noqa: E402
from openclaw_lossless.recall.assemble import Assembler  # noqa: E402
from openclaw_lossless.recall.search import keyword_search  # noqa: E402
from openclaw_lossless.recall.window import Descriptor  # noqa: E402
from openclaw_lossless.sidecar import Sidecar  # noqa: E402
from openclaw_lossless.store.connection import Connection, Database  # noqa: E402
from openclaw_lossless.store.sessions import Scope  # noqa: E402

RESULTS = REPO / "benchmarks" / "results"
TARGETS = {
    "assemble_p95_ms@100000": 25.0,
    "assemble_p95_ms@1000000": 60.0,
    "http_assemble_p95_ms@100000": 40.0,
    "commit_p95_ms@1000000": 10.0,
    "drain_msg_per_s": 40.0,
    "bytes_per_message_beyond_text": 3072.0,
    "rss_mb@1000000": 1536.0,
    "cold_start_s@1000000": 3.0,
}


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

    def search_many(self, queries: Vectors, scope: Scope, k: int) -> list[tuple[int, Vectors]]:
        """``VectorIndex.search_many`` by exact scans: each query's ``k`` nearest, with the cosine to every query."""
        rows = np.asarray(queries, dtype=np.float32).reshape(len(queries), -1)
        found = dict.fromkeys(i for query in rows for i, _ in self.search(query, scope, k))
        scored = [(i, rows @ vector) for i in found if (vector := self.vector(i)) is not None]
        return sorted(scored, key=lambda item: -float(item[1][0]))


def percentiles(samples_s: list[float]) -> dict[str, float]:
    ms = np.asarray(samples_s) * 1000
    return {f"p{q}": round(float(np.percentile(ms, q)), 2) for q in (50, 95, 99)} | {"n": len(samples_s)}


def timed(calls: list[Callable[[], object]], warmup: int = 3) -> list[float]:
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

    def one(prompt: str) -> Callable[[], object]:
        return lambda: sidecar.queries.assemble("bench-live", f"agent:{AGENT}:live", descriptors, prompt, None, recall)

    return percentiles(timed([one(p) for p in prompts]))


def measure_lanes(sidecar: Sidecar, prompts: list[str]) -> dict[str, Any]:
    """The vector and keyword lanes alone, on fresh prompts: where the assemble time goes."""
    assert sidecar.index is not None and sidecar.embedding.provider is not None
    index, provider, conn = sidecar.index, sidecar.embedding.provider, sidecar.db.reader()
    scope = Scope(agent_ids=frozenset({AGENT}))
    vectors = provider.embed(prompts)
    deadline = time.monotonic() + 3600
    terms = sidecar.assembler.terms  # as assemble runs it, with the term limit
    return {
        "query_embed": percentiles(timed([functools.partial(provider.embed, [p]) for p in prompts])),
        "vector": percentiles(timed([functools.partial(index.search, v, scope, 100) for v in vectors])),
        "keyword": percentiles(
            timed([functools.partial(keyword_search, conn, p, scope, 100, deadline, terms) for p in prompts])
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
    sidecar.queries.assembler = Assembler(cast(VectorIndex, lane), sidecar.embedding)  # same code, vec0 as the lane
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

        sidecar.db.write(lambda c: store_vectors(c, [r[0] for r in rows], vectors, [r[1] for r in rows]))


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
        keyword_search(conn, "helm", scope, 100, time.monotonic() + 60)
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


class Server:
    """A real ``openclaw-lossless serve`` process on loopback over the filled store; stopped by its pid."""

    def __init__(self, state_dir: Path) -> None:
        from benchmarks.locomo import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_")} | {"LOSSLESS_MAX_DB_SIZE_MB": "0"}
        command = [sys.executable, "-m", "openclaw_lossless", "serve", "--state-dir", str(state_dir)]
        command += ["--port", str(self.port), "--log-level", "warning"]
        self.log = (state_dir / "server.log").open("wb")
        self.began = time.monotonic()
        self.process = subprocess.Popen(command, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        self.token = ""
        self.state_dir = state_dir

    def wait(self, ready: Callable[[dict[str, Any]], bool], timeout_s: float = 600) -> float:
        """Seconds from spawn until ``/healthz`` satisfies ``ready``."""
        while time.monotonic() - self.began < timeout_s:
            if self.process.poll() is not None:
                raise RuntimeError(f"the sidecar exited: {(self.state_dir / 'server.log').read_text()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                health = httpx.get(f"{self.url}/healthz", timeout=2).json()
                if ready(health):
                    return time.monotonic() - self.began
            time.sleep(0.01)
        raise RuntimeError("the sidecar did not become ready")

    def rss_mb(self) -> dict[str, float]:
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        fields = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.startswith("Vm")}
        return {"rss_mb": round(int(fields["VmRSS"]) / 1024, 1), "peak_rss_mb": round(int(fields["VmHWM"]) / 1024, 1)}

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(5)
        self.log.close()


def measure_server(state_dir: Path, prompts: list[str], history: list[dict[str, Any]]) -> dict[str, Any]:
    server = Server(state_dir)
    try:
        ready_s = server.wait(lambda h: h.get("status") == "ok")
        loaded_s = server.wait(lambda h: bool((h.get("vectorIndex") or {}).get("loaded")))
        token = (state_dir / "token").read_text().strip()
        with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:

            def one(prompt: str) -> Callable[[], object]:
                body = {"sessionId": "bench-http", "sessionKey": f"agent:{AGENT}:http", "descriptors": history,
                        "prompt": prompt}  # fmt: skip
                return lambda: client.post("/v1/hooks/assemble", json=body).raise_for_status()

            http = percentiles(timed([one(p) for p in prompts]))
            stats = client.get("/stats").json()
        return {
            "cold_start_s": round(ready_s, 2),
            "index_loaded_s": round(loaded_s, 2),
            "http_assemble": http,
            "server_side_assemble": stats["latency"].get("assemble"),
            **server.rss_mb(),
        }
    finally:
        server.stop()


def run_size(size: int, real: Vectors, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    state = work / f"n{size}"
    state.mkdir(mode=0o700)
    # Archiving off (maxDbSizeMb 0): its default of 500 MB would start archiving a 1M store in the background
    # in the middle of what is measured here, which is the turn's path.
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0)
    print(f"[{size}] filling", flush=True)
    sidecar = Sidecar(settings, start_worker=False)  # creates the schema and the vector table
    baseline = scale_data.open_baseline(state / "baseline.sqlite", real.shape[1])
    report = scale_data.fill(sidecar.db, baseline, size, real)
    sidecar.close()
    result: dict[str, Any] = {"messages": report.messages, "sessions": report.sessions,
                              "fill_s": round(report.seconds, 1), "real_vectors": report.real_vectors}  # fmt: skip
    began = time.monotonic()
    sidecar = Sidecar(settings, start_worker=False)
    result["in_process_open_s"] = round(time.monotonic() - began, 2)
    try:
        generator = ChatGenerator(seed=size + 11)
        history = host_history(ChatGenerator(seed=99))
        prompts = [generator.prompt() for _ in range(args.queries + 3)]
        print(f"[{size}] size, plans, overlap, assemble", flush=True)
        result["size"] = measure_size(sidecar.db, report.messages)
        result["plans"] = query_plans(sidecar.db.reader())
        result["overlap"] = measure_overlap(sidecar, baseline, prompts[: args.overlap_queries])
        result["assemble"] = measure_assemble(sidecar, prompts, [])
        result["assemble_window"] = measure_assemble(sidecar, [generator.prompt() for _ in prompts], history)
        result["lanes"] = measure_lanes(sidecar, [generator.prompt() for _ in range(args.queries + 3)])
        print(f"[{size}] baseline", flush=True)
        fresh = [generator.prompt() for _ in range(args.baseline_queries + 3)]
        result["baseline"] = measure_baseline(sidecar, baseline, fresh)
        result["baseline"]["vec0_bytes_per_message"] = round(os.stat(state / "baseline.sqlite").st_size / size)
        print(f"[{size}] drain, commits", flush=True)
        result["drain"] = measure_drain(sidecar, generator, args.drain_messages)
        result["commit"] = measure_commits(sidecar, generator, args.commit_turns, args.sustain_s)
    finally:
        sidecar.close()
        baseline.close()
    result["load_average"] = [round(x, 2) for x in os.getloadavg()]  # other work on the machine: read with care
    print(f"[{size}] server", flush=True)
    result["server"] = measure_server(state, [generator.prompt() for _ in range(args.queries + 3)], history)
    print(json.dumps(summary_row(size, result)), flush=True)
    if not args.keep:
        shutil.rmtree(state)
    return result


def summary_row(size: int, r: dict[str, Any]) -> dict[str, Any]:
    return {
        "messages": size,
        "assemble_p95_ms": r["assemble"]["p95"],
        "baseline_assemble_p95_ms": r["baseline"]["assemble"]["p95"],
        "http_assemble_p95_ms": r["server"]["http_assemble"]["p95"],
        "commit_p95_ms": r["commit"]["latency"]["p95"],
        "drain_msg_per_s": r["drain"]["msg_per_s"],
        "beyond_text_per_message": r["size"]["beyond_text_per_message"],
        "rss_mb": r["server"]["rss_mb"],
        "cold_start_s": r["server"]["cold_start_s"],
        "overlap_top20": r["overlap"]["top20"]["mean"],
    }


def real_vectors(count: int) -> Vectors:
    """The real local model's vectors for the first ``count`` messages the fill makes."""
    from openclaw_lossless.embed.service import build_provider

    provider = build_provider(Settings())
    try:
        texts = scale_data.sample_texts(count)
        return np.concatenate([provider.embed(texts[i : i + 32]) for i in range(0, len(texts), 32)])
    finally:
        provider.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--messages", default="10000,100000,1000000", help="store sizes, comma-separated")
    parser.add_argument("--quick", action="store_true", help="2,000 messages and fewer probes: a smoke run")
    parser.add_argument("--sample", type=int, default=1500, help="messages given real model vectors")
    parser.add_argument("--queries", type=int, default=200, help="assembles timed per size")
    parser.add_argument("--keep", action="store_true", help="keep the stores (the directory is printed at the end)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.messages.split(",")]
    name = "scale"
    args.overlap_queries, args.baseline_queries, args.drain_messages = 50, 30, 256
    args.commit_turns, args.sustain_s = 300, 5.0
    if args.quick:
        sizes, name, args.sample, args.queries = [2000], "scale-quick", 300, 40
        args.overlap_queries, args.baseline_queries, args.drain_messages = 20, 10, 64
        args.commit_turns, args.sustain_s = 50, 2.0
    began = time.monotonic()
    print(f"embedding {args.sample} sample messages with the local model", flush=True)
    real = real_vectors(args.sample)
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        # --keep: a directory that outlives the run (printed), to profile the stores afterwards.
        tmp = tempfile.mkdtemp(prefix="lossless-scale-") if args.keep else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="lossless-scale-"))  # fmt: skip
        for size in sizes:
            results[str(size)] = run_size(size, real, args, Path(tmp))
    if args.keep:
        print(f"stores kept in {tmp}", flush=True)
    document = {
        "benchmark": "scale",
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            **machine.describe(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "command": "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "vectors": f"real local-model vectors for the first {args.sample} messages; stand-ins (mixes of two real "
        "vectors plus noise, same shape) for the rest",
        "seconds": round(time.monotonic() - began, 1),
        "targets": TARGETS,
        "sizes": results,
    }
    from benchmarks import scale_report

    scale_report.write(document, args.out, name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
