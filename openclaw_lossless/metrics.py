"""In-process counters and latency percentiles for ``/stats`` (since start; nothing leaves the machine)."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import numpy as np

SAMPLE = 2000


class Reservoir:
    """A uniform sample of every value seen since start, in bounded memory (Vitter's algorithm R).

    A window of the latest values would make the percentiles describe only the last few minutes of a
    week-long run; a reservoir keeps each value with the same chance, so they describe the whole run.
    """

    def __init__(self, size: int = SAMPLE) -> None:
        self.size = size
        self.seen = 0
        self.values: list[float] = []

    def add(self, value: float) -> None:
        self.seen += 1
        if len(self.values) < self.size:
            self.values.append(value)
            return
        slot = random.randrange(self.seen)
        if slot < self.size:
            self.values[slot] = value


class Metrics:
    def __init__(self) -> None:
        self.started_at = time.time()
        self._lock = threading.Lock()
        self._latencies: dict[str, Reservoir] = {}
        self.recall_skips: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()

    def observe(self, operation: str, seconds: float) -> None:
        with self._lock:
            self._latencies.setdefault(operation, Reservoir()).add(seconds * 1000)

    def latency(self) -> dict[str, dict[str, float]]:
        """p50/p95/p99 in milliseconds of each operation since start, and how many there were."""
        with self._lock:
            snapshot = {op: (sample.seen, list(sample.values)) for op, sample in self._latencies.items()}
        report: dict[str, dict[str, float]] = {}
        for op, (count, values) in snapshot.items():
            p50, p95, p99 = np.percentile(values, [50, 95, 99])
            report[op] = {
                "count": count,
                "p50Ms": round(float(p50), 3),
                "p95Ms": round(float(p95), 3),
                "p99Ms": round(float(p99), 3),
            }
        return report
