"""Support for the fault, crash and load tests: the figures they record, and the sidecar as a real process.

The crash and load tests need what a user runs: ``openclaw-lossless serve`` in a process of its own that
can be SIGKILLed and whose memory can be sampled, not the in-process app: ``SidecarProcess``, the harness the
benchmarks use too (``benchmarks/harness.py``). Each test writes its figures (one
section per test, merged) to ``$LOSSLESS_RELIABILITY_RESULTS``, by default the git-ignored
``benchmarks/results/reliability-last.json``: an ordinary test run never rewrites a tracked file. The
committed ``benchmarks/results/reliability.json``, which the README's reliability table quotes, is
regenerated only on purpose, by ``make reliability``.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.harness import SidecarProcess as SidecarProcess

DEFAULT_RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "reliability-last.json"


def results_path() -> Path:
    """Where figures go: ``$LOSSLESS_RELIABILITY_RESULTS`` when set (``make reliability``), else an ignored file."""
    chosen = os.environ.get("LOSSLESS_RELIABILITY_RESULTS")
    return Path(chosen) if chosen else DEFAULT_RESULTS


def record(section: str, figures: dict[str, Any]) -> None:
    """Merge one test's figures into the results file (read, update one section, write)."""
    results = results_path()
    data: dict[str, Any] = json.loads(results.read_text()) if results.exists() else {}
    data[section] = figures | {"recordedAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
    results.parent.mkdir(parents=True, exist_ok=True)
    results.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    print(f"\n{section}: {json.dumps(figures, sort_keys=True)}")
