"""What a forget costs on a SQLite store of N messages: the first forget on a store written before every write
connection zeroed what it freed (it rebuilds the file once, ``VACUUM``), and any forget after it.

For each size a fresh store is bulk-filled as ``scale.py`` fills it (``scale_data.py``; stand-in vectors
shaped like the local model's, from random unit vectors: a forget's cost does not depend on them), its
"free space zeroed" mark is removed (as on a store from an older version), then one message is forgotten
twice, each through ``run_forget`` (the HTTP endpoint's call), timed. Timings are recorded, never asserted.

    python benchmarks/forget_cost.py --messages 100000,1000000

Writes ``benchmarks/results/forget-cost.json``. See docs/decisions/0100-forget-leaves-no-byte.md.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import scale_data
from benchmarks.machine import describe as describe_machine
from openclaw_lossless.api.forget import ForgetParts, run_forget
from openclaw_lossless.config import Settings
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.model.forgetting import Selector
from openclaw_lossless.store.sqlite import meta
from openclaw_lossless.store.sqlite.migrations import FREE_SPACE_ZEROED

RESULTS = Path(__file__).resolve().parent / "results" / "forget-cost.json"
DIMENSION = 384


def run_size(size: int, work: Path) -> dict[str, Any]:
    state = work / f"n{size}"
    state.mkdir(mode=0o700)
    settings = Settings(state_dir=state, openclaw_state=work / "openclaw", port=0, max_db_size_mb=0)
    sidecar = Sidecar(settings, start_worker=False)
    try:
        rng = np.random.default_rng(5)
        real = rng.standard_normal((256, DIMENSION)).astype(np.float32)
        real /= np.linalg.norm(real, axis=1, keepdims=True)
        baseline = scale_data.open_baseline(state / "baseline.sqlite", DIMENSION)
        report = scale_data.fill(sidecar.db, baseline, size, real, ops=sidecar.ops)
        baseline.close()
        sidecar.db.write(lambda conn: meta.remove(conn, FREE_SPACE_ZEROED))  # a store from an older version
        file_bytes = sidecar.db.file_bytes()
        first = _timed_forget(sidecar, size // 2)
        second = _timed_forget(sidecar, size // 2 + 1)
        return {
            "messages": report.messages,
            "file_mb": round(file_bytes / 1e6, 1),
            "first_forget_with_rebuild_s": round(first, 2),
            "later_forget_s": round(second, 2),
        }
    finally:
        sidecar.close()


def _timed_forget(sidecar: Sidecar, message_id: int) -> float:
    began = time.monotonic()
    run_forget(ForgetParts.of(sidecar), Selector(ids=(message_id,)), dry_run=False)
    return time.monotonic() - began


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="100000,1000000", help="store sizes, comma-separated")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.messages.split(",")]
    results: dict[str, Any] = {"machine": describe_machine(), "sizes": []}
    with tempfile.TemporaryDirectory(prefix="forget-cost-") as work:
        for size in sizes:
            print(f"[{size}] filling and forgetting", flush=True)
            results["sizes"].append(run_size(size, Path(work)))
            print(json.dumps(results["sizes"][-1]), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
