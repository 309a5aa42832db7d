"""The embedding backlog is embedded in batches of similar length, and every message of it still gets a vector.

A batch is padded to its longest text: a backlog taken in id order (short replies between pasted logs) makes
the model spend much of its time on padding, which is what slows the drain on a plain CPU.
"""

from __future__ import annotations

import time

from tests.helpers import HashEmbedder, LiveSidecar

LOG_LINE = "2026-11-20T10:15:02Z worker-7 retrying upload of shard 0042 after a timeout from the object store; "


def _messages(count: int) -> list[dict[str, object]]:
    """Alternating short replies and long pasted logs, as a tool-heavy agent session has them."""
    out: list[dict[str, object]] = []
    for n in range(count):
        text = f"ok, noted item {n}" if n % 2 == 0 else f"log {n}: " + LOG_LINE * 6
        out.append({"role": "user", "content": [{"type": "text", "text": text}], "timestamp": 1_763_000_000_000 + n})
    return out


def _wait_for(embedder: HashEmbedder, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(embedder.texts) < count and time.monotonic() < deadline:
        time.sleep(0.05)


def test_a_mixed_backlog_is_embedded_short_texts_together_and_long_ones_together(
    sidecar: LiveSidecar, embedder: HashEmbedder
) -> None:
    messages = _messages(64)
    body = {"advancementKey": "t-1", "sessionId": "s-1", "sessionKey": "agent:main:main", "messages": messages}
    assert sidecar.client.post("/v1/hooks/commit-turn", json=body).status_code == 200
    _wait_for(embedder, 64)

    embedded = embedder.texts
    assert sorted(embedded) == sorted(str(m["content"][0]["text"]) for m in messages)  # type: ignore[index]
    assert embedder.batches == 2  # two batches of 32, not a mix of both kinds in each
    assert all(text.startswith("ok, noted") for text in embedded[:32])
    assert all(text.startswith("log ") for text in embedded[32:])
    health = sidecar.client.get("/healthz").json()
    assert health["backlog"] == 0
