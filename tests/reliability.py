"""Support for the fault, crash and load tests: the sidecar as a real process, and the figures they record.

The crash and load tests need what a user runs: ``openclaw-lossless serve`` in a process of its own that
can be SIGKILLed and whose memory can be sampled, not the in-process app. Each test writes its figures (one
section per test, merged) to ``$LOSSLESS_RELIABILITY_RESULTS``, by default the git-ignored
``benchmarks/results/reliability-last.json``: an ordinary test run never rewrites a tracked file. The
committed ``benchmarks/results/reliability.json``, which the README's reliability table quotes, is
regenerated only on purpose, by ``make reliability``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import free_port

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


def percentile(values: list[float], share: float) -> float:
    """The nearest-rank percentile (``share`` in 0..1) of ``values``."""
    ordered = sorted(values)
    if not ordered:
        return 0.0
    rank = max(0, min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1))
    return ordered[rank]


class SidecarProcess:
    """``python -m openclaw_lossless serve`` on a free loopback port, with its own state dir and log."""

    def __init__(
        self,
        state_dir: Path,
        *,
        env: dict[str, str] | None = None,
        port: int | None = None,
        args: Sequence[str] = (),
    ) -> None:
        self.state_dir = state_dir
        self.args = list(args)  # more ``serve`` options; the tests still connect through loopback
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = state_dir.parent / "sidecar.log"
        self.env = (
            os.environ
            | {
                "LOSSLESS_STATE_DIR": str(state_dir),
                "LOSSLESS_OPENCLAW_STATE": str(state_dir.parent / "openclaw-state"),
                "LOSSLESS_PORT": str(self.port),
            }
            | (env or {})
        )
        self.process: subprocess.Popen[bytes] | None = None

    def spawn(self) -> SidecarProcess:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "openclaw_lossless", "serve", "--log-level", "warning", *self.args],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def wait_healthy(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"sidecar exited with {self.process.returncode}: {self.tail()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise AssertionError(f"sidecar not healthy after {timeout}s: {self.tail()}")
            time.sleep(0.05)

    def token(self) -> str:
        return (self.state_dir / "token").read_text().strip()

    def client(self, timeout: float = 10) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token()}"}, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: no handler runs, no buffer is flushed, as when the machine or the OOM killer takes it."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()

    def rss_bytes(self) -> int:
        """Resident memory of the sidecar process, from /proc."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS in /proc status")

    def tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""
