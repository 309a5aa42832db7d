"""The sidecar as a process of its own, for the benchmarks and the fault, crash and load tests.

Both need what a user runs: ``python -m openclaw_lossless serve`` on a free loopback port with its own state
directory, reached over real HTTP, whose start-up can be timed, whose memory can be read from ``/proc`` and
which can be stopped politely or SIGKILLed. One copy of that lives here, with the one percentile both report
with, so a benchmark's figure and a test's figure are taken the same way.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np


class SidecarFailed(RuntimeError):
    """The sidecar exited, never became ready, or answered a call with an error (the message says which)."""


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(values: Sequence[float], q: float, *, interpolate: bool = False) -> float:
    """The ``q``-th percentile (0..100) of ``values``; 0.0 when there are none.

    By default the nearest rank: a value that was measured. ``interpolate`` gives numpy's linear interpolation
    between the two nearest ranks, which the product's ``/stats`` and the scale benchmark's figures use.
    """
    if not values:
        return 0.0
    if interpolate:
        return float(np.percentile(np.asarray(values, dtype=np.float64), q))
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(q / 100 * len(ordered)) - 1))
    return float(ordered[rank])


def health_ok(health: dict[str, Any]) -> bool:
    """Any answer of ``/healthz`` with status 200 (``ok``, or ``degraded``: keyword-only recall)."""
    return True


class SidecarProcess:
    """``python -m openclaw_lossless serve`` on a free loopback port, with its own state dir and log.

    ``env`` adds settings (``LOSSLESS_*``) on top of the inherited environment; ``clean_env`` first drops every
    ``LOSSLESS_*`` the caller's shell has, so a benchmark measures the defaults and nothing it did not name.
    The host's OpenClaw state is a directory beside the state dir, never the user's own transcripts.
    """

    def __init__(
        self,
        state_dir: Path,
        *,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        args: Sequence[str] = (),
        log: Path | None = None,
        clean_env: bool = False,
    ) -> None:
        self.state_dir = state_dir
        self.args = list(args)  # more ``serve`` options; callers still connect through loopback
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or state_dir.parent / "sidecar.log"
        inherited = {k: v for k, v in os.environ.items() if not (clean_env and k.startswith("LOSSLESS_"))}
        self.env = inherited | {
            "LOSSLESS_STATE_DIR": str(state_dir),
            "LOSSLESS_OPENCLAW_STATE": str(state_dir.parent / "openclaw-state"),
            "LOSSLESS_PORT": str(self.port),
        }
        self.env |= env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.spawned_at = 0.0

    def spawn(self) -> SidecarProcess:
        """Start it (again, after ``kill`` or ``stop``); its output is appended to ``log``."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.spawned_at = time.monotonic()
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
        return self._running().pid

    def _running(self) -> subprocess.Popen[bytes]:
        if self.process is None:
            raise SidecarFailed("the sidecar was never spawned")
        return self.process

    def health(self) -> dict[str, Any]:
        """``GET /healthz`` (public), parsed."""
        answer: dict[str, Any] = httpx.get(f"{self.url}/healthz", timeout=2).json()
        return answer

    def wait_healthy(
        self, timeout: float = 60, *, ready: Callable[[dict[str, Any]], bool] = health_ok, poll_s: float = 0.05
    ) -> float:
        """Seconds from spawn until ``/healthz`` answers 200 and ``ready`` holds for its body (waits at most
        ``timeout`` seconds from now)."""
        process = self._running()
        deadline = time.monotonic() + timeout
        while True:
            if process.poll() is not None:
                raise SidecarFailed(f"the sidecar exited with {process.returncode}: {self.tail()}")
            with contextlib.suppress(httpx.HTTPError, ValueError):
                answer = httpx.get(f"{self.url}/healthz", timeout=2)
                if answer.status_code == 200 and ready(answer.json()):
                    return time.monotonic() - self.spawned_at
            if time.monotonic() > deadline:
                raise SidecarFailed(f"the sidecar was not ready after {timeout:.0f} s: {self.tail()}")
            time.sleep(poll_s)

    def token(self) -> str:
        return (self.state_dir / "token").read_text().strip()

    def client(self, timeout: float = 10) -> httpx.Client:
        """An HTTP client that sends the store's token (the caller closes it)."""
        return httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token()}"}, timeout=timeout)

    def kill(self) -> None:
        """SIGKILL: no handler runs, no buffer is flushed, as when the machine or the OOM killer takes it."""
        process = self._running()
        os.kill(process.pid, signal.SIGKILL)
        process.wait(10)

    def stop(self) -> None:
        """SIGTERM, as a supervisor stops it; SIGKILL if it has not exited within 20 s."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.kill()

    def memory(self) -> dict[str, int]:
        """Resident memory now (``rss``) and at its peak (``peak``), in bytes, from /proc."""
        fields: dict[str, int] = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                fields[line.split(":")[0]] = int(line.split()[1]) * 1024
        if "VmRSS" not in fields:
            raise SidecarFailed("no VmRSS in /proc status")
        return {"rss": fields["VmRSS"], "peak": fields.get("VmHWM", fields["VmRSS"])}

    def rss_bytes(self) -> int:
        """Resident memory of the sidecar process, from /proc."""
        return self.memory()["rss"]

    def tail(self, chars: int = 2000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""


class JsonCalls:
    """Calls to a running sidecar whose answer must be 200 and JSON; any other answer stops the run."""

    def __init__(self, client: httpx.Client) -> None:
        self.client = client

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._checked("POST", path, self.client.post(path, json=body))

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self._checked("GET", path, self.client.get(path, params=params))

    @staticmethod
    def _checked(method: str, path: str, response: httpx.Response) -> dict[str, Any]:
        if response.status_code != 200:
            raise SidecarFailed(f"{method} {path} -> {response.status_code}: {response.text[:500]}")
        answer: dict[str, Any] = response.json()
        return answer

    def drain(self, timeout_s: float = 1800) -> None:
        """Wait until every stored message has its vector (the embedding backlog is empty)."""
        deadline = time.monotonic() + timeout_s
        while True:
            stats = self.get("/stats")
            if stats["backlog"] == 0 and stats["vectors"] >= stats["messages"]:
                return
            if time.monotonic() > deadline:
                raise SidecarFailed(f"embedding backlog did not drain: {stats['backlog']} left")
            time.sleep(0.5)
