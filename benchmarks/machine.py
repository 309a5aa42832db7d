"""What machine a benchmark ran on: the CPU model and the instruction sets the figures depend on.

The same code measures differently on a CPU with AVX-512 and VNNI (onnxruntime's int8 kernels, numpy's
dot products) and on one with AVX2 only, so every result records which it was; a figure without it cannot be
compared with another run's.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The flags the hot path's libraries choose kernels by (onnxruntime int8 GEMM, numpy/BLAS, SQLite none).
RELEVANT_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx_vnni",
    "avx512_bf16",
    "amx_int8",
    "asimd",
    "asimddp",
    "sve",
)


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, Any]:
    """The CPU's model name and which of ``RELEVANT_FLAGS`` it has (Linux; elsewhere what ``platform`` says)."""
    model, flags = platform.processor() or platform.machine(), set[str]()
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {"model": model, "flags": []}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and value.strip():
            model = value.strip()
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    return {"model": model, "flags": [flag for flag in RELEVANT_FLAGS if flag in flags]}


def describe() -> dict[str, Any]:
    """Cores, CPU model and instruction sets, platform and Python: what every result file records."""
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def line(machine: dict[str, Any]) -> str:
    """One line for a results page: '2 cores, AMD EPYC 7B13 (avx2, fma, ...), Linux-..., Python 3.11'."""
    found = machine.get("cpu")
    if found is None:  # a result written before the CPU was recorded
        described = "CPU not recorded"
    else:
        described = f"{found.get('model')} ({', '.join(found.get('flags') or []) or 'none of the vector extensions'})"
    return f"{machine.get('cpus')} cores, {described}, {machine.get('platform')}, Python {machine.get('python')}"


def command(script: str, argv: Sequence[str]) -> str:
    """The command a result records: where the run wrote its files (``--out``) is no part of what it measured
    nor a path to publish, and which server it reached (``--database-url``, which may hold a password) is
    recorded as ``URL``."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("--out", "--database-url"):
            skip = True
            if arg == "--database-url":
                kept.append("--database-url URL")
        elif arg.startswith("--database-url="):
            kept.append("--database-url URL")
        elif not arg.startswith("--out="):
            kept.append(arg)
    return " ".join(["python", f"benchmarks/{script}", *kept])
