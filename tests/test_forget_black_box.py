"""Forget as a user checks it: ``openclaw-lossless serve`` in its own process, turns committed over HTTP, the
backlog drained, messages forgotten over ``POST /v1/forget``, the process stopped, then every file of the
state directory read as bytes (gzip archives decompressed). The forgotten text is in none of them; the kept
text still is, and still found by search.

Nothing is faked: the real process, the real local model, SQLite with FTS5 and sqlite-vec.
"""

from __future__ import annotations

import gzip
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.reliability import SidecarProcess

pytestmark = pytest.mark.sqlite_only  # the state dir's files are the store only on SQLite (PostgreSQL: docs/forget.md)

SESSION = "5d7f0c2e-7b1a-4c55-9d0e-2f6a8b3c4d5e"
KEY = "agent:main:main"
T0 = 1_780_000_000_000
KEPT = "blackboxkeptword"


def marker(n: int) -> str:
    return f"blackboxshade{n:03d}"


def state_bytes(state: Path) -> bytes:
    """Every file under the state directory as a hex editor sees it; a gzip archive also decompressed."""
    chunks: list[bytes] = []
    for path in sorted(p for p in state.rglob("*") if p.is_file() and not p.is_socket()):
        raw = path.read_bytes()
        chunks.append(raw)
        if path.name.endswith(".gz"):
            chunks.append(gzip.decompress(raw))
    return b"\n".join(chunks)


def _text(n: int, marked: dict[int, str]) -> str:
    said = f"Turn {n} talks about tomatoes and {KEPT}{n:02d}."
    return said + (f" The shed will be painted {marked[n]} in spring." if n in marked else "")


def _turn(n: int, text: str) -> dict[str, Any]:
    at = T0 + n * 60_000
    return {
        "advancementKey": f"bb-turn-{n}",
        "sessionId": SESSION,
        "sessionKey": KEY,
        "messages": [
            {"role": "user", "content": text, "timestamp": at},
            {"role": "assistant", "content": f"Reply {n}: noted, about the garden plan.", "timestamp": at + 1},
        ],
    }


def _drain(client: httpx.Client) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        stats: dict[str, Any] = client.get("/stats").json()
        if stats["backlog"] == 0 and stats["vectors"] >= stats["messages"]:
            return stats
        assert time.monotonic() < deadline, f"the backlog did not drain: {stats}"
        time.sleep(0.2)


def test_forgotten_text_is_in_no_file_of_the_state_dir_after_a_stop(tmp_path: Path) -> None:
    state = tmp_path / "state"
    marked = {3: marker(1), 11: marker(2), 19: marker(3), 27: marker(4), 35: marker(5)}
    kept = KEPT
    server = SidecarProcess(state).spawn()
    try:
        server.wait_healthy()
        with server.client(timeout=60) as client:
            for n in range(40):
                answer = client.post("/v1/hooks/commit-turn", json=_turn(n, _text(n, marked)))
                assert answer.status_code == 200, answer.text
            _drain(client)
            ids: list[str] = []
            for word in marked.values():
                found = client.get("/v1/search", params={"q": word, "mode": "keyword"}).json()["hits"]
                ids += [r["citation"] for r in found if word in r["text"]]
            assert len(ids) == len(marked), client.get("/v1/search", params={"q": marker(1), "mode": "keyword"}).text
            done = client.post("/v1/forget", json={"ids": ids})
            assert done.status_code == 200, done.text
            assert done.json()["forgotten"] == len(marked)
            stats = client.get("/stats").json()
            assert stats["messages"] == 80 - len(marked)
            assert stats["vectors"] == stats["messages"]  # the index forgot their vectors too, no restart
    finally:
        server.stop()
    raw = state_bytes(state)
    left = [text for text in marked.values() if text.encode() in raw]
    assert not left, f"forgotten text still in the state dir's files: {left}"
    missing = [n for n in range(40) if n not in marked and f"{kept}{n:02d}".encode() not in raw]
    assert not missing, f"kept text no longer in the files: {missing}"
    again = SidecarProcess(state).spawn()
    try:
        again.wait_healthy()
        with again.client(timeout=60) as client:
            for word in marked.values():
                assert not client.get("/v1/search", params={"q": word, "mode": "keyword"}).json()["hits"]
            kept_hits = client.get("/v1/search", params={"q": f"{kept}07", "mode": "keyword"}).json()["hits"]
            assert [h for h in kept_hits if f"{kept}07" in h["text"]]
    finally:
        again.stop()
