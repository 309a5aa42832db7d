"""Every way an embedding API fails costs vectors for a while, never a message, and never blocks a commit.

The API is a real HTTP server on loopback (the network edge is the only thing faked) that can time out,
refuse connections (it stops listening), answer 429 with ``Retry-After``, 500, malformed JSON, the wrong
number of vectors or the wrong dimension. For each fault: turns commit while it lasts, keyword recall finds
them, ``/stats`` counts the failure under its kind, and once the API heals the backlog drains to one
vector per message. What the fake server saw shows the client's policy: a fault that can heal by waiting
is retried (``Retry-After`` honoured), an invalid answer fails the batch at once, as asking again would
only cost time and money for the same wrong answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.embed.openai_compat import OpenAIEmbedder
from openclaw_lossless.errors import EmbeddingResponseInvalid, EmbeddingUnavailable
from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, free_port, live_sidecar, make_settings
from tests.reliability import record

DIMENSION = 32
CLIENT_TIMEOUT_S = 0.5
RETRY_AFTER_S = 1

# fault -> the failure kind /stats must count for it
FAULTS = {
    "timeout": "timeout",
    "refused": "connect",
    "429": "http_429",
    "500": "http_5xx",
    "malformed_json": "invalid_json",
    "wrong_count": "wrong_count",
    "wrong_dimension": "wrong_dimension",
}
INVALID_ANSWERS = frozenset({"malformed_json", "wrong_count", "wrong_dimension"})
handled: dict[str, dict[str, Any]] = {}


class FakeEmbeddingApi:
    """An OpenAI-compatible ``POST /v1/embeddings`` on 127.0.0.1 with a switchable fault."""

    def __init__(self) -> None:
        self.port = free_port()
        self.vectors = HashEmbedder(dimension=DIMENSION)
        self.fault: str | None = None
        self.retry_after = str(RETRY_AFTER_S)  # the 429's Retry-After header
        self.requests: list[tuple[float, str | None]] = []  # (when, fault served)
        self._server: ThreadingHTTPServer | None = None
        self._lock = threading.Lock()
        self.listen()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def listen(self) -> None:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.answer(self, body["input"])

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        """Stop listening: connections are refused until ``listen`` again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def answer(self, handler: BaseHTTPRequestHandler, inputs: list[str]) -> None:
        fault = self.fault
        with self._lock:
            self.requests.append((time.monotonic(), fault))
        if fault == "timeout":
            time.sleep(CLIENT_TIMEOUT_S * 3)
        if fault == "429":
            self.send(handler, 429, {"error": {"message": "slow down"}}, {"Retry-After": self.retry_after})
        elif fault == "500":
            self.send(handler, 500, {"error": {"message": "upstream exploded"}})
        elif fault == "malformed_json":
            self.send(handler, 200, '{"data": [{"index": 0, "embedding": [0.1, ')
        else:
            vectors = self.vectors.embed(inputs)
            data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
            if fault == "wrong_count":
                data = data[:-1]
            if fault == "wrong_dimension":
                data = [d | {"embedding": d["embedding"][:-1]} for d in data]
            self.send(handler, 200, {"object": "list", "data": data, "model": "fake"})

    @staticmethod
    def send(handler: BaseHTTPRequestHandler, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        raw = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
        try:
            handler.send_response(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            for name, value in (headers or {}).items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(raw)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout fault)
            return


@pytest.fixture
def api() -> Iterator[FakeEmbeddingApi]:
    server = FakeEmbeddingApi()
    yield server
    server.close()


@pytest.fixture
def sidecar_on_api(tmp_path: Path, api: FakeEmbeddingApi) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path / "state", embedding_provider="openai-compatible", query_embed_deadline_ms=200)
    provider = OpenAIEmbedder(
        base_url=api.base_url,
        api_key="sk-test-not-real-000000000000",
        model="fake",
        dimensions=DIMENSION,
        max_retries=1,
        backoff_base_s=0.05,
        backoff_max_s=2.0,
        timeout_s=CLIENT_TIMEOUT_S,
    )
    with live_sidecar(settings, provider) as server:
        yield server


def stats(server: LiveSidecar) -> dict[str, Any]:
    result: dict[str, Any] = server.client.get("/stats").json()
    return result


def wait_for(condition: Any, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_an_embedding_api_fault_loses_nothing_and_heals(
    fault: str, api: FakeEmbeddingApi, sidecar_on_api: LiveSidecar
) -> None:
    server, kind = sidecar_on_api, FAULTS[fault]
    api.fault = fault
    if fault == "refused":
        api.close()
    turns = conversation(10, session="s-fault")
    for turn in turns:  # the API is failing the whole time these commit
        reply = server.post("commit-turn", commit_body(turn, session="s-fault"))
        assert reply.status_code == 200 and reply.json()["status"] == "committed"
    wait_for(lambda: stats(server)["embedder"]["worker"]["failures"] >= 1, "the worker to give up on a batch")
    during = stats(server)
    assert during["embedder"]["api"]["failures"][kind] >= 1, during["embedder"]["api"]
    assert during["messages"] == 20 and during["turns"] == 10
    assert during["vectors"] == 0 and during["backlog"] == 20, "a failed batch was stored anyway"
    assert during["embedder"]["worker"]["lastError"]
    if fault in INVALID_ANSWERS:
        assert during["embedder"]["api"]["retries"] == 0, f"an invalid answer ({fault}) was asked for again"
    else:
        assert during["embedder"]["api"]["retries"] >= 1, f"a transient fault ({fault}) was not retried"
    hits = server.client.get("/v1/search", params={"q": turns[3].messages[0]["content"], "mode": "keyword"})
    assert hits.status_code == 200 and hits.json()["hits"], "keyword search must work during the fault"
    body = {"sessionId": "s-fault", "sessionKey": "agent:main:main", "messages": [], "prompt": "billing"}
    assert server.post("assemble", body).status_code == 200

    if fault == "refused":
        api.listen()
    api.fault = None
    server.wait_for_backlog(timeout=90)
    after = stats(server)
    assert after["vectors"] == after["messages"] == 20 and after["backlog"] == 0
    assert "sk-test-not-real" not in json.dumps(after)
    if fault == "429":  # the client waited at least what the server asked before its retry
        served = [t for t, f in api.requests if f == "429"]
        later = [t for t, _ in api.requests if t > served[0]]
        assert later and later[0] - served[0] >= RETRY_AFTER_S
    handled[fault] = {
        "kind": kind,
        "failuresCounted": after["embedder"]["api"]["failures"][kind],
        "messagesLost": 20 - after["messages"],
        "commitsRefused": 0,
    }
    if len(handled) == len(FAULTS):
        record("embeddingFaults", {"cases": dict(sorted(handled.items())), "handled": len(handled)})


@pytest.mark.parametrize("fault", list(FAULTS))
def test_invalid_answers_fail_the_batch_at_once_and_transient_faults_are_retried(
    fault: str, api: FakeEmbeddingApi
) -> None:
    """Counted where the requests arrive: one for an invalid answer, 1 + max_retries for a transient fault."""
    retries = 2
    waits: list[float] = []
    provider = OpenAIEmbedder(
        base_url=api.base_url,
        api_key="sk-test-not-real-000000000000",
        model="fake",
        dimensions=DIMENSION,
        max_retries=retries,
        backoff_base_s=0.05,
        timeout_s=CLIENT_TIMEOUT_S,
        sleep=waits.append,  # the waits asked for, without waiting them
    )
    api.fault = fault
    if fault == "refused":
        api.close()
    try:
        with pytest.raises(EmbeddingUnavailable) as failed:
            provider.embed(["the first text", "the second text"])
    finally:
        provider.close()
    attempts = 1 if fault in INVALID_ANSWERS else 1 + retries
    assert len(api.requests) == (0 if fault == "refused" else attempts), api.requests  # refused: none arrive
    assert (provider.stats.requests, provider.stats.retries, len(waits)) == (attempts, attempts - 1, attempts - 1)
    assert provider.stats.failures[FAULTS[fault]] == attempts
    assert isinstance(failed.value, EmbeddingResponseInvalid) == (fault in INVALID_ANSWERS)
    if fault == "429":
        assert waits == [RETRY_AFTER_S] * retries


def api_sidecar(tmp_path: Path, api: FakeEmbeddingApi, **client: Any) -> LiveSidecar:
    settings = make_settings(tmp_path / "state", embedding_provider="openai-compatible", query_embed_deadline_ms=200)
    provider = OpenAIEmbedder(
        base_url=api.base_url,
        api_key="sk-test-not-real-000000000000",
        model="fake",
        dimensions=DIMENSION,
        max_retries=2,
        backoff_base_s=0.05,
        backoff_max_s=2.0,
        timeout_s=CLIENT_TIMEOUT_S,
        **client,
    )
    return LiveSidecar(settings, provider).start()


def test_a_long_retry_after_sends_nothing_inside_it_and_holds_up_no_turn_nor_shutdown(
    tmp_path: Path, api: FakeEmbeddingApi
) -> None:
    """429 with Retry-After: 30: one request, then none until the 30 s are over (not a retry every 8 s inside
    them); turns commit and recall answers meanwhile (the query falls back to keywords at once instead of
    waiting), and stopping the sidecar does not wait the 30 s out."""
    api.fault, api.retry_after = "429", "30"
    server = api_sidecar(tmp_path, api)
    try:
        for turn in conversation(4, session="s-limited"):
            assert server.post("commit-turn", commit_body(turn, session="s-limited")).json()["status"] == "committed"
        wait_for(lambda: stats(server)["embedder"]["worker"]["failures"] >= 1, "the worker to hit the 429")
        body = {"sessionId": "s-limited", "sessionKey": "agent:main:main", "messages": [], "prompt": "billing"}
        for prompt in ("billing", "the invoice", "hosting costs"):
            assert server.post("assemble", body | {"prompt": prompt}).status_code == 200
        during = stats(server)
        assert during["embedder"]["worker"]["backoffS"] == 30.0
        assert "asked to wait 30s" in during["embedder"]["worker"]["lastError"]
        assert during["embedder"]["fallbacks"].get("query_failed", 0) >= 1
        assert len(api.requests) == 1, "a request was sent inside the server's requested wait"
        assert during["backlog"] == during["messages"] == 8
    finally:
        server.stop()
    worker = server.sidecar.worker
    assert worker is not None and not worker._thread.is_alive(), "shutdown waited for the Retry-After"


def test_a_retry_after_above_the_ceiling_waits_the_ceiling_then_drains(tmp_path: Path, api: FakeEmbeddingApi) -> None:
    api.fault, api.retry_after = "429", "3600"
    server = api_sidecar(tmp_path, api, retry_after_max_s=1.0)
    try:
        for turn in conversation(3, session="s-ceiling"):
            server.post("commit-turn", commit_body(turn, session="s-ceiling"))
        wait_for(lambda: stats(server)["embedder"]["worker"]["failures"] >= 1, "the worker to hit the 429")
        assert stats(server)["embedder"]["worker"]["backoffS"] == 1.0
        api.fault = None
        server.wait_for_backlog(timeout=60)
        assert stats(server)["vectors"] == 6
    finally:
        server.stop()
