"""/stats latency percentiles describe the whole run since start, in bounded memory."""

from __future__ import annotations

from openclaw_lossless.observe.metrics import SAMPLE, Metrics


def test_percentiles_cover_every_call_since_start_not_only_the_latest() -> None:
    """A slow first hour must still show after thousands of fast calls: with a window of the latest 2,000
    the p95 below would read 1 ms."""
    metrics = Metrics()
    for _ in range(10_000):
        metrics.observe("assemble", 0.100)
    for _ in range(2_000):
        metrics.observe("assemble", 0.001)
    report = metrics.latency()["assemble"]
    assert report.count == 12_000
    assert report.p50_ms == report.p95_ms == 100.0
    assert report.p99_ms == 100.0


def test_memory_stays_bounded() -> None:
    metrics = Metrics()
    for n in range(3 * SAMPLE):
        metrics.observe("commit-turn", n / 1000)
    assert len(metrics._latencies["commit-turn"].values) == SAMPLE
