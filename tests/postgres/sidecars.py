"""Several sidecar processes serving one PostgreSQL database, as a team runs one per gateway host.

Each is the real ``openclaw-lossless serve`` (``SidecarProcess``, the crash test's harness) with a state dir,
token, port and log of its own and ``--database-url`` naming the one shared database. None of the caller's
``LOSSLESS_*`` environment reaches them (the PostgreSQL test pass sets a schema per test there): they all
serve the default schema. ``Courier`` is a host that does not care which of them answers: a request that
fails or gets a retryable answer goes to another sidecar, as a gateway whose own sidecar died would send it.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import httpx

from tests.reliability import SidecarProcess

# Keyword recall only (no model to load: four starts fit the test's time on two cores), no catch-up from a
# host's transcripts, and a pool small enough that four sidecars plus the connections of just-killed ones
# stay under the test server's 100. The assemble deadline is generous: the tests check what recall finds
# on a loaded machine, not how fast (a skipped recall would read as a miss).
KEYWORD_ONLY = {
    "LOSSLESS_EMBEDDING_PROVIDER": "none",
    "LOSSLESS_CATCH_UP": "false",
    "LOSSLESS_DATABASE_CONNECTIONS": "16",
    "LOSSLESS_ASSEMBLE_DEADLINE_MS": "20000",
}


def with_model(model_dir: Path) -> dict[str, str]:
    """``KEYWORD_ONLY`` but embedding with the real local model (what users run by default)."""
    return KEYWORD_ONLY | {"LOSSLESS_EMBEDDING_PROVIDER": "local", "LOSSLESS_MODEL_DIR": str(model_dir)}


RETRYABLE_STATUSES = frozenset({502, 503, 504})  # a sidecar going down or its store briefly unavailable
GIVE_UP_S = 120.0


class Fleet:
    """``count`` sidecars on one database URL, each in ``root/sidecar-<n>/``."""

    def __init__(self, root: Path, url: str, count: int, *, env: Mapping[str, str] = KEYWORD_ONLY) -> None:
        self.sidecars = [
            SidecarProcess(root / f"sidecar-{n}" / "state", env=env, args=["--database-url", url], clean_env=True)
            for n in range(count)
        ]

    def __enter__(self) -> Self:
        """Start them all at once (their migrations meet under the store's lock) and wait until each answers."""
        for sidecar in self.sidecars:
            sidecar.spawn()
        for sidecar in self.sidecars:
            sidecar.wait_healthy(timeout=120)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        for sidecar in self.sidecars:
            sidecar.stop()

    def __len__(self) -> int:
        return len(self.sidecars)

    def restart(self, n: int) -> None:
        """SIGKILL sidecar ``n`` (wherever it is: serving, or still starting) and start it again at once."""
        self.sidecars[n].kill()
        self.sidecars[n].spawn()

    def wait_healthy(self) -> None:
        for sidecar in self.sidecars:
            sidecar.wait_healthy(timeout=120)

    def drained_within(self, seconds: float) -> bool:
        """Whether the shared embedding backlog empties, every message with its vector, within ``seconds``
        (asked of whichever sidecar answers: the backlog and the vectors are the database's)."""
        give_up = time.monotonic() + seconds
        while time.monotonic() < give_up:
            for sidecar in self.sidecars:
                try:
                    with sidecar.client() as client:
                        stats = client.get("/stats").json()
                except (httpx.HTTPError, OSError):
                    continue
                if stats["backlog"] == 0 and stats["vectors"] == stats["messages"]:
                    return True
                break
            time.sleep(0.5)
        return False


class NoAnswer(RuntimeError):
    """No sidecar answered a request within ``GIVE_UP_S``."""


class Courier:
    """One host thread's HTTP clients to every sidecar of a fleet, and the retry rule across them."""

    def __init__(self, fleet: Fleet, rng: random.Random) -> None:
        self.fleet, self.rng = fleet, rng
        self.clients: dict[int, httpx.Client] = {}
        self.failures = 0  # requests that failed or got a retryable answer, and were sent again elsewhere

    def send(self, method: str, path: str, *, avoid: Iterable[int] = (), **request: Any) -> tuple[int, httpx.Response]:
        """Send to a random sidecar not in ``avoid``; after a failure, to another one (never the one that just
        failed while another is allowed). Returns the answering sidecar and its non-retryable answer."""
        excluded = set(avoid)
        last: int | None = None
        give_up = time.monotonic() + GIVE_UP_S
        while time.monotonic() < give_up:
            n = self.pick(excluded | ({last} if last is not None else set()))
            try:
                response = self.client(n).request(method, path, **request)
            except (httpx.HTTPError, OSError):
                self.forget(n)
            else:
                if response.status_code not in RETRYABLE_STATUSES:
                    return n, response
            self.failures += 1
            last = n
            time.sleep(0.02)
        raise NoAnswer(f"no sidecar answered {method} {path} in {GIVE_UP_S:.0f} s")

    def pick(self, excluded: set[int]) -> int:
        allowed = [n for n in range(len(self.fleet)) if n not in excluded]
        return self.rng.choice(allowed or range(len(self.fleet)))

    def client(self, n: int) -> httpx.Client:
        if n not in self.clients:
            self.clients[n] = self.fleet.sidecars[n].client(timeout=15)
        return self.clients[n]

    def forget(self, n: int) -> None:
        """Drop a client whose connection broke: the next request to that sidecar connects afresh."""
        client = self.clients.pop(n, None)
        if client is not None:
            client.close()

    def close(self) -> None:
        for n in list(self.clients):
            self.forget(n)
