"""Run several processes at once, each a sidecar of its own, and gather what each reports."""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable
from typing import Any

from tests.postgres.backend.workers import Report

CONTEXT = multiprocessing.get_context("spawn")
TIMEOUT_S = 120.0


def run_together(target: Callable[..., None], argument_sets: list[tuple[Any, ...]]) -> dict[str, Any]:
    """Start one process per argument set (each gets ``(name, *arguments, barrier, queue)``), released at the
    same moment by a barrier; returns each process's report by name."""
    start = CONTEXT.Barrier(len(argument_sets))
    results: multiprocessing.Queue[Report] = CONTEXT.Queue()
    processes = [
        CONTEXT.Process(target=target, args=(f"p{n}", *arguments, start, results))
        for n, arguments in enumerate(argument_sets)
    ]
    for process in processes:
        process.start()
    try:
        reports = dict(results.get(timeout=TIMEOUT_S) for _ in processes)
    finally:
        for process in processes:
            process.join(timeout=TIMEOUT_S)
            if process.is_alive():
                process.kill()
    return reports
