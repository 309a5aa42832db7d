"""How fast the local embedder is: backlog throughput, query latency and cold start, per variant and threads.

The numbers decide the default variant: the backlog worker must drain at >= 40 messages/s on 2 cores,
and a query must embed well inside the per-turn deadline. Messages are synthetic chat of ~110 words
(about 140 tokens), embedded in calls of 32; cold start runs in a fresh interpreter (import, load, first
vector). Other processes on the machine skew every figure, so each is a median and the load average is
recorded next to it.

    python benchmarks/embed_speed.py [--dir MODEL_DIR] [--repeat 5] [--model multilingual-e5-small]

Prints a table and writes ``benchmarks/results/embed_speed.json`` (``embed_speed-<model>.json`` for
another model than the default). ``peak_rss_mb`` is the cold-start interpreter's peak resident memory
(``VmHWM``) after loading the model and embedding one text: what the model adds, plus Python's ~40 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script: benchmarks/ is on the path, the repository is not
    sys.path.insert(0, str(REPO))

from benchmarks import machine  # noqa: E402
from openclaw_lossless.embed.local import LocalEmbedder  # noqa: E402
from openclaw_lossless.embed.model_files import MODEL_NAME, MODELS, default_model_dir, fetch_model  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "embed_speed.json"
QUERY = "When did we decide to use REST instead of GraphQL for the public API?"
WORDS = [
    "the",
    "a",
    "we",
    "I",
    "you",
    "it",
    "to",
    "of",
    "and",
    "in",
    "on",
    "for",
    "with",
    "that",
    "this",
    "was",
    "is",
    "be",
    "not",
    "but",
    "so",
    "if",
    "then",
    "when",
    "what",
    "why",
    "how",
    "deploy",
    "build",
    "test",
    "release",
    "branch",
    "merge",
    "review",
    "commit",
    "server",
    "database",
    "postgres",
    "cache",
    "queue",
    "worker",
    "api",
    "endpoint",
    "request",
    "response",
    "timeout",
    "retry",
    "error",
    "failed",
    "fixed",
    "works",
    "slow",
    "fast",
    "memory",
    "disk",
    "cpu",
    "meeting",
    "plan",
    "idea",
    "think",
    "decided",
    "agree",
    "maybe",
    "tomorrow",
    "yesterday",
    "today",
    "week",
    "later",
    "soon",
    "again",
    "still",
    "customer",
    "user",
    "team",
    "manager",
    "design",
    "feature",
    "bug",
    "issue",
    "ticket",
    "priority",
    "deadline",
    "budget",
    "cost",
    "price",
    "painting",
    "music",
    "trip",
    "family",
    "kids",
    "dinner",
    "weekend",
    "book",
    "movie",
    "garden",
    "coffee",
    "morning",
    "evening",
    "friend",
    "because",
    "although",
    "however",
    "instead",
    "before",
    "after",
    "during",
    "while",
    "until",
    "since",
    "about",
    "around",
    "between",
]


def synthetic_messages(count: int, words: int = 110, seed: int = 7) -> list[str]:
    """Chat-like messages of ~``words`` words; deterministic so runs compare."""
    rng = np.random.default_rng(seed)
    messages = []
    for _ in range(count):
        picked = rng.choice(WORDS, size=int(rng.integers(words - 10, words + 11)))
        messages.append(" ".join(picked).capitalize() + ".")
    return messages


def _median_seconds(action: Any, repeat: int) -> tuple[float, float]:
    """Median wall time and median process CPU time of ``action``.

    With one thread, CPU time is what the wall time would be on an idle machine, so it is the figure to
    trust when other processes share the cores.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        wall, cpu = time.perf_counter(), time.process_time()
        action()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def cold_start(model_dir: Path, variant: str, threads: int, model: str = MODEL_NAME) -> dict[str, float]:
    """Fresh interpreter: import + load + first short vector, the load alone, and its peak memory."""
    code = (
        "import time, sys; t0 = time.perf_counter()\n"
        "from pathlib import Path\n"
        "from openclaw_lossless.embed.local import LocalEmbedder\n"
        "t1 = time.perf_counter()\n"
        f"e = LocalEmbedder(Path({str(model_dir)!r}), variant={variant!r}, threads={threads}, model={model!r})\n"
        "t2 = time.perf_counter(); e.embed(['hello'])\n"
        "hwm = [l for l in open('/proc/self/status') if l.startswith('VmHWM:')]\n"
        "rss = int(hwm[0].split()[1]) / 1024 if hwm else float('nan')\n"
        "print(time.perf_counter() - t0, time.perf_counter() - t1, t2 - t1, rss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    total, without_import, load, rss_mb = (float(x) for x in out.split())
    return {"total_s": total, "load_and_first_s": without_import, "load_s": load, "peak_rss_mb": rss_mb}


def measure(model_dir: Path, variant: str, threads: int, repeat: int, model: str = MODEL_NAME) -> dict[str, Any]:
    """One row of the table."""
    embedder = LocalEmbedder(model_dir, variant=variant, threads=threads, batch_size=32, model=model)
    messages = synthetic_messages(96)
    embedder.embed(messages[:32])  # warm-up: first run allocates
    batch_s, batch_cpu_s = _median_seconds(lambda: embedder.embed(messages), repeat)
    query_s, _ = _median_seconds(lambda: embedder.embed([QUERY]), repeat * 10)
    colds = [cold_start(model_dir, variant, threads, model) for _ in range(3)]
    embedder.close()
    msg_per_s = len(messages) / batch_s
    return {
        "variant": variant,
        "threads": threads,
        "msg_per_s": round(msg_per_s, 1),
        "ms_per_msg": round(1000 / msg_per_s, 1),
        "cpu_ms_per_msg": round(1000 * batch_cpu_s / len(messages), 1),
        "query_ms": round(query_s * 1000, 2),
        "cold_start_s": round(statistics.median(c["total_s"] for c in colds), 3),
        "cold_start_without_import_s": round(statistics.median(c["load_and_first_s"] for c in colds), 3),
        "load_s": round(statistics.median(c["load_s"] for c in colds), 3),
        "peak_rss_mb": round(statistics.median(c["peak_rss_mb"] for c in colds)),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=None, help="model directory (default: user cache)")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions per figure (median)")
    parser.add_argument("--model", choices=sorted(MODELS), default=MODEL_NAME, help="which local model")
    args = parser.parse_args()
    model_dir: Path = args.dir or default_model_dir()
    fetch_model(model_dir, spec=MODELS[args.model])
    load_before = os.getloadavg()
    rows = [measure(model_dir, v, t, args.repeat, args.model) for v in ("fp32", "int8") for t in (1, 2)]
    report = {
        "model": args.model,
        "machine": machine.describe(),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in os.getloadavg()],
        "messages": "96 synthetic ~110-word messages, calls of 32",
        "rows": rows,
    }
    print(
        f"{'variant':8} {'thr':>3} {'msg/s':>7} {'ms/msg':>7} {'cpu ms':>7} {'query ms':>9} {'cold s':>7}"
        f" {'load s':>7} {'rss MB':>7}"
    )
    for r in rows:
        print(
            f"{r['variant']:8} {r['threads']:>3} {r['msg_per_s']:>7} {r['ms_per_msg']:>7} {r['cpu_ms_per_msg']:>7} "
            f"{r['query_ms']:>9} {r['cold_start_s']:>7} {r['load_s']:>7} {r['peak_rss_mb']:>7}"
        )
    print(f"load average before {report['load_avg_before']}, after {report['load_avg_after']}")
    results = RESULTS if args.model == MODEL_NAME else RESULTS.with_name(f"embed_speed-{args.model}.json")
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
