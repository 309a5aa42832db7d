"""Sixteen sessions at once: every commit and every assemble answers, none sees a lock, memory stays bounded.

The served sidecar (a real process, the real local model embedding the backlog behind the traffic) takes
16 sessions that each commit a turn and then assemble the next one, over and over, for a bounded time
(``LOSSLESS_SOAK_S``, default 45 s; the issue's "few minutes" is a matter of setting it). Its resident
memory is sampled from /proc throughout. Throughput and p95 latency are recorded, not asserted: on a shared
2-core machine they say more about the neighbours than about the code.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from tests.conversation import conversation
from tests.reliability import SidecarProcess, percentile, record

SESSIONS = 16
SOAK_S = float(os.environ.get("LOSSLESS_SOAK_S", "45"))
WARM_UP_SHARE = 0.3
# With the data held still, memory should not move. It does creep, ~10 KB per assemble that embeds a new
# query (flat with the embedder off; onnxruntime alone levels off): an open finding, recorded in the
# figures. This bound catches a gross leak while that creep is run down.
ALLOWED_GROWTH_BYTES = 48 * 1024 * 1024


@dataclass
class Session:
    name: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"commit-turn": [], "assemble": []})
    errors: list[str] = field(default_factory=list)
    committed: int = 0

    def run(self, server: SidecarProcess, until: float, *, replay: bool = False) -> None:
        """Commit the next turn (or, with ``replay``, re-deliver an acknowledged one) and assemble, until."""
        turns = conversation(4000, session=self.name, seed=sum(map(ord, self.name)))
        key = {"sessionId": self.name, "sessionKey": f"agent:load:{self.name}"}
        with server.client(timeout=60) as client:
            n = 0
            while time.monotonic() < until:
                turn = turns[n % max(1, self.committed)] if replay else turns[self.committed]
                commit = key | {"advancementKey": turn.key, "messages": turn.messages}
                prompt = str(turns[-1 - n].messages[0]["content"]) + f" ({n})"  # a new query every time
                assemble = key | {"messages": turn.messages, "prompt": prompt, "tokenBudget": 4000}
                for hook, body in (("commit-turn", commit), ("assemble", assemble)):
                    self.call(client, hook, body)
                if not replay:
                    self.committed += 1
                n += 1

    def call(self, client: httpx.Client, hook: str, body: Mapping[str, object]) -> None:
        began = time.perf_counter()
        try:
            response = client.post(f"/v1/hooks/{hook}", json=body)
        except httpx.HTTPError as exc:
            self.errors.append(f"{hook}: {type(exc).__name__}: {exc}")
            return
        self.latencies[hook].append(time.perf_counter() - began)
        if response.status_code != 200:
            self.errors.append(f"{hook}: {response.status_code} {response.text[:200]}")


def in_parallel(sessions: list[Session], server: SidecarProcess, seconds: float, *, replay: bool) -> None:
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=s.run, args=(server, until), kwargs={"replay": replay}) for s in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 120)


class RssSampler:
    def __init__(self, server: SidecarProcess) -> None:
        self.server, self.stop = server, threading.Event()
        self.samples: list[int] = []
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        while not self.stop.wait(0.5):
            self.samples.append(self.server.rss_bytes())


@pytest.mark.slow
def test_sixteen_sessions_commit_and_assemble_without_errors_locks_or_growth(tmp_path: Path) -> None:
    """Phase one: every session commits new turns and assembles (throughput, p95, no errors, no locks).
    Phase two, once the backlog is embedded: the same traffic shape with the data held still (each commit
    re-delivers an acknowledged turn, each assemble asks something new), so resident memory should be flat:
    whatever grows now grows per request, not with the store (see ALLOWED_GROWTH_BYTES)."""
    server = SidecarProcess(tmp_path / "state").spawn()
    try:
        server.wait_healthy()
        sessions = [Session(f"load-{k}") for k in range(SESSIONS)]
        began = time.monotonic()
        in_parallel(sessions, server, SOAK_S * 0.5, replay=False)
        elapsed = time.monotonic() - began
        commits = [x for s in sessions for x in s.latencies["commit-turn"]]
        assembles = [x for s in sessions for x in s.latencies["assemble"]]
        with server.client() as client:
            stored = client.get("/stats").json()
            deadline = time.monotonic() + 180
            while client.get("/stats").json()["backlog"] > 0:
                assert time.monotonic() < deadline, "the backlog did not drain"
                time.sleep(0.5)
        sampler = RssSampler(server)
        sampler.thread.start()
        in_parallel(sessions, server, SOAK_S * 0.5, replay=True)
        sampler.stop.set()
        sampler.thread.join()
        with server.client() as client:
            held = client.get("/stats").json()
    finally:
        server.stop()

    errors = [e for s in sessions for e in s.errors]
    assert not errors, f"{len(errors)} errors, e.g. {errors[:5]}"
    assert "database is locked" not in server.tail(100_000)
    warm = sampler.samples[int(len(sampler.samples) * WARM_UP_SHARE) :]
    growth = warm[-1] - warm[0]
    figures = {
        "sessions": SESSIONS,
        "seconds": round(elapsed, 1),
        "commits": len(commits),
        "assembles": len(assembles),
        "errors": len(errors),
        "commitsPerS": round(len(commits) / elapsed, 1),
        "assemblesPerS": round(len(assembles) / elapsed, 1),
        "commitP95Ms": round(percentile(commits, 0.95) * 1000, 1),
        "assembleP95Ms": round(percentile(assembles, 0.95) * 1000, 1),
        "steadyRequests": sum(len(v) for s in sessions for v in s.latencies.values()) - len(commits) - len(assembles),
        "rssAfterWarmUpMb": round(warm[0] / 2**20, 1),
        "rssEndMb": round(warm[-1] / 2**20, 1),
        "rssGrowthMb": round(growth / 2**20, 1),
        "rssSeriesMb": [round(rss / 2**20) for rss in sampler.samples[::6]],
        "queryEmbedFallbacks": held["embedder"]["fallbacks"],
    }
    record("concurrency", figures)
    assert stored["turns"] == len(commits), "every acknowledged commit is a stored turn"
    assert held["turns"] == stored["turns"] and held["messages"] == stored["messages"], "a re-delivery was stored"
    assert len(commits) >= SESSIONS and len(assembles) >= SESSIONS
    assert growth <= ALLOWED_GROWTH_BYTES, f"memory grew {growth / 2**20:.1f} MiB after warm-up"
