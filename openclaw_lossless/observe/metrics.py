"""In-process counters and latency percentiles for ``/stats`` (since start; nothing leaves the machine).

The same observations feed a latency histogram per operation, which ``/metrics`` exposes to Prometheus
(``prometheus.py``); the histogram is not registered anywhere global, so every sidecar in a process keeps its own.
They also feed the last hour, minute by minute (``last_hour.py``), which the status page draws, with the
backlog's size over that hour.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np
from prometheus_client import Histogram

from openclaw_lossless.observe.last_hour import BacklogWindow, Clock, LatencyWindow, MinuteLatency, minutes_of

SAMPLE = 2000
# The hot path takes milliseconds: fine steps from 1 ms, and room up to the seconds a stalled store would take.
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
# Observed by the sidecar; present in /metrics (count 0) before their first call, so alerts can see them.
OPERATIONS = ("assemble", "commit-turn", "search")


@dataclass(frozen=True)
class Latency:
    """One operation's latency since start: how many, and the p50/p95/p99 in milliseconds."""

    count: int
    p50_ms: float
    p95_ms: float
    p99_ms: float


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
    def __init__(self, clock: Clock = time.time) -> None:
        self.started_at = time.time()
        self._clock = clock
        self._lock = threading.Lock()
        self._latencies: dict[str, Reservoir] = {}
        self._last_hour = {operation: LatencyWindow() for operation in OPERATIONS}
        self.backlog = BacklogWindow(clock)  # sampled by the embedding worker and each /healthz, /stats, status page
        self.recall_skips: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.stored: Counter[str] = Counter()  # messages stored, by the hook that brought them
        self.durations = Histogram(
            "lossless_operation_duration_seconds",
            "Time the sidecar spent in an operation (assemble, commit-turn, search), HTTP excluded.",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=None,
        )
        for operation in OPERATIONS:
            self.durations.labels(operation)

    def observe(self, operation: str, seconds: float) -> None:
        now = self._clock()
        with self._lock:
            self._latencies.setdefault(operation, Reservoir()).add(seconds * 1000)
            window = self._last_hour.get(operation)
            if window is None:  # not setdefault: that would build a window on every call
                window = self._last_hour[operation] = LatencyWindow()
            window.add(seconds * 1000, now)
        self.durations.labels(operation).observe(seconds)

    def last_hour(self) -> dict[str, list[MinuteLatency]]:
        """Each operation's last 60 minutes, oldest first: calls, p50 and p95 in milliseconds per minute."""
        now = self._clock()
        with self._lock:
            copied = {operation: window.copy(now) for operation, window in self._last_hour.items()}
        return {operation: minutes_of(minutes) for operation, minutes in copied.items()}

    def latency(self) -> dict[str, Latency]:
        """p50/p95/p99 in milliseconds of each operation since start, and how many there were."""
        with self._lock:
            snapshot = {op: (sample.seen, list(sample.values)) for op, sample in self._latencies.items()}
        report: dict[str, Latency] = {}
        for op, (count, values) in snapshot.items():
            p50, p95, p99 = np.percentile(values, [50, 95, 99])
            report[op] = Latency(count, round(float(p50), 3), round(float(p95), 3), round(float(p99), 3))
        return report
