"""No secret leaves: not through the logs, not to an embedding API, not in the token's wake.

The sidecar runs as users run it (``openclaw-lossless serve`` in a subprocess, default log level) with the
OpenAI-compatible provider pointed at a fake embedding API on loopback that records every text it receives.
Turns carrying a marker word and planted secrets go through commit, assemble and search. Afterwards the log
holds no message text, no secret, no token and no API key; the fake API saw the marker (so texts did reach
it) and none of the secrets, including those typed into the prompt and the search box.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.redaction_corpus import credential_cases, present
from tests.reliability import SidecarProcess

MARKER = "wombatlighthouse"
SECRETS = {
    "github": "ghp_" + "R8x2Lq9Zt4Vb7Nc1Md5Kp3Wf6Hj0Gs2Ya8Ue",
    "openai": "sk-proj-" + "Q7w9E2r4T6y8U0i1O3p5A7s9D1f3G5h7J9k",
    "aws": "AKIA" + "Z7Q3W9E5R1T8Y4U6",
    "url_password": "hunter2sekrit",
}
# Every shape of tests/redaction_corpus.py goes through the same path: none may reach the embedding API.
CORPUS = credential_cases()
DIMENSION = 8
API_KEY = "sk-test-" + "embedding-api-key-0123456789"


@dataclass
class FakeEmbeddingAPI:
    """An OpenAI-compatible ``/v1/embeddings`` on 127.0.0.1 that records what it was sent."""

    texts: list[str] = field(default_factory=list)
    authorizations: list[str] = field(default_factory=list)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                api.texts += inputs
                api.authorizations.append(self.headers.get("Authorization", ""))
                data = [
                    {"object": "embedding", "index": i, "embedding": [1.0 + (len(t) % 5)] + [0.5] * (DIMENSION - 1)}
                    for i, t in enumerate(inputs)
                ]
                payload = json.dumps({"object": "list", "data": data, "model": "test-model"}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        return Handler


@pytest.fixture
def embedding_api() -> Iterator[tuple[FakeEmbeddingAPI, str]]:
    api = FakeEmbeddingAPI()
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield api, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _turns() -> list[dict[str, Any]]:
    lines = [
        f"my github token is {SECRETS['github']}",
        f"and the openai key {SECRETS['openai']}",
        f"aws {SECRETS['aws']}",
        f"db at postgres://admin:{SECRETS['url_password']}@db.internal:5432/app",
        *(case.text for case in CORPUS),
    ]
    return [
        {
            "advancementKey": f"leak-{n}",
            "sessionId": "s-leak",
            "sessionKey": "agent:main:leak",
            "messages": [
                {"role": "user", "content": f"{MARKER} note {n}: {line}", "timestamp": 1_767_225_600_000 + n},
                {"role": "assistant", "content": [{"type": "text", "text": f"{MARKER} stored {n}"}]},
            ],
        }
        for n, line in enumerate(lines)
    ]


def test_no_message_text_secret_or_token_in_logs_or_at_the_embedding_api(
    tmp_path: Path, embedding_api: tuple[FakeEmbeddingAPI, str]
) -> None:
    api, base_url = embedding_api
    env = {
        "LOSSLESS_EMBEDDING_PROVIDER": "openai-compatible",
        "EMBEDDING_BASE_URL": base_url,
        "EMBEDDING_MODEL": "test-model",
        "EMBEDDING_DIMENSIONS": str(DIMENSION),
        "OPENAI_API_KEY": API_KEY,
    }
    server = SidecarProcess(tmp_path / "state", env=env, args=["--log-level", "info"]).spawn()  # serve's default
    try:
        server.wait_healthy()
        token = server.token()
        client = server.client(timeout=30)
        for turn in _turns():
            assert client.post("/v1/hooks/commit-turn", json=turn).json()["status"] == "committed"
        deadline = time.monotonic() + 60
        while client.get("/stats").json()["backlog"] > 0:
            assert time.monotonic() < deadline, "backlog did not drain"
            time.sleep(0.1)
        pasted = " ".join(case.text for case in CORPUS[::7])
        prompt = f"{MARKER} which github token did I give you, was it {SECRETS['github']}? {pasted}"
        assemble = {"sessionId": "s-next", "sessionKey": "agent:main:leak", "messages": [], "prompt": prompt}
        assert client.post("/v1/hooks/assemble", json=assemble).status_code == 200
        query = {"q": f"{MARKER} {SECRETS['openai']}", "mode": "hybrid"}
        assert client.get("/v1/search", params=query).status_code == 200
        assert client.get("/v1/search", params={"q": "x", "scope": "planet:mars"}).status_code == 422
        client.close()
    finally:
        server.stop()  # SIGTERM, as a supervisor stops it
    log = server.log.read_text()

    assert "Application startup complete" in log or "Uvicorn running" in log  # the log was captured
    for forbidden in [MARKER, *SECRETS.values(), token, API_KEY]:
        assert forbidden not in log, forbidden
    assert [case.shape for case in CORPUS if present(case.secret, log)] == []

    sent = "\n".join(api.texts)
    assert MARKER in sent  # the texts did reach the embedding API ...
    for name, secret in SECRETS.items():  # ... and no secret with them, from storage or from a query
        assert secret not in sent, name
    assert [case.shape for case in CORPUS if present(case.secret, sent)] == []
    assert set(api.authorizations) == {f"Bearer {API_KEY}"}
