"""In-process counters and latency percentiles for ``/stats`` (since start; nothing leaves the machine)."""

from __future__ import annotations

import threading
import time
from collections import Counter, deque

import numpy as np

WINDOW = 2000


class Metrics:
    def __init__(self) -> None:
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._latencies: dict[str, deque[float]] = {}
        self._counts: dict[str, int] = Counter()
        self.recall_skips: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()

    def observe(self, operation: str, seconds: float) -> None:
        with self._lock:
            self._latencies.setdefault(operation, deque(maxlen=WINDOW)).append(seconds * 1000)
            self._counts[operation] += 1

    def latency(self) -> dict[str, dict[str, float]]:
        """p50/p95/p99 in milliseconds over the last requests of each operation."""
        with self._lock:
            snapshot = {op: list(values) for op, values in self._latencies.items()}
            counts = dict(self._counts)
        report: dict[str, dict[str, float]] = {}
        for op, values in snapshot.items():
            p50, p95, p99 = np.percentile(values, [50, 95, 99])
            report[op] = {
                "count": counts[op],
                "p50Ms": round(float(p50), 3),
                "p95Ms": round(float(p95), 3),
                "p99Ms": round(float(p99), 3),
            }
        return report
