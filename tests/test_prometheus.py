"""``/metrics``: every series docs/web-ui.md documents is served, parsed by Prometheus' own parser, and moves
with traffic; under the token on the main port, without it on ``--metrics-port`` (which serves nothing else)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from openclaw_lossless.embed.provider import Vectors
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, free_port, live_sidecar, make_settings
from tests.reliability import SidecarProcess

ROOT = Path(__file__).parents[1]
METRICS_PAGE = (ROOT / "docs" / "web-ui.md").read_text()
DASHBOARD = ROOT / "contrib" / "grafana-dashboard.json"
# Served only with the openai-compatible provider (its request counts).
API_ONLY = {"lossless_embedder_api_requests_total", "lossless_embedder_api_retries_total",
            "lossless_embedder_api_failures_total"}  # fmt: skip
SUFFIXES = ("_bucket", "_count", "_sum")


def documented() -> set[str]:
    """Every ``lossless_*`` name in the docs' Metrics section: the table, the scrape config and the alerts."""
    section = METRICS_PAGE.split("## Metrics (Prometheus)", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"\blossless_[a-z_]+[a-z]", section))


class Scrape:
    """One ``/metrics`` answer, parsed by ``prometheus_client``'s parser."""

    def __init__(self, text: str) -> None:
        self.families = {family.name: family for family in text_string_to_metric_families(text)}
        self.samples = [sample for family in self.families.values() for sample in family.samples]

    def names(self) -> set[str]:
        """Families (a counter as ``<name>_total``, as PromQL names it, even before its first sample) and samples."""
        counters = {f"{name}_total" for name, family in self.families.items() if family.type == "counter"}
        return set(self.families) | counters | {sample.name for sample in self.samples}

    def value(self, name: str, **labels: str) -> float:
        found = [s.value for s in self.samples if s.name == name and labels.items() <= s.labels.items()]
        assert len(found) == 1, (name, labels, found)
        return float(found[0])


def scrape(server: LiveSidecar) -> Scrape:
    response = server.client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=")
    return Scrape(response.text)


class HeldEmbedder(HashEmbedder):
    """Embeds only once released, so the backlog holds still while the test reads it (and a query misses
    its deadline, so recall falls back to keyword search)."""

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> Vectors:
        self.release.wait(60)
        return super().embed(texts)


@pytest.fixture
def held(tmp_path: Path) -> Iterator[tuple[LiveSidecar, HeldEmbedder]]:
    embedder = HeldEmbedder()
    try:
        with live_sidecar(make_settings(tmp_path / "state", query_embed_deadline_ms=50), embedder) as server:
            yield server, embedder
    finally:
        embedder.release.set()


def turn(key: str, *texts: str, session_key: str = "agent:main:main") -> dict[str, Any]:
    messages = [
        {"role": "user" if n % 2 == 0 else "assistant", "content": text, "timestamp": 1763888400000 + n}
        for n, text in enumerate(texts)
    ]
    return {"sessionId": "s-main", "sessionKey": session_key, "advancementKey": key, "messages": messages}


def test_the_readme_lists_the_series() -> None:
    """What the next test holds the served series to: the docs' table, scrape config and alerts."""
    names = documented()
    assert names >= {"lossless_turns_total", "lossless_backlog_messages", "lossless_build_info", *API_ONLY}


def test_series_move_with_traffic(held: tuple[LiveSidecar, HeldEmbedder]) -> None:
    server, embedder = held
    before = scrape(server)
    missing = documented() - API_ONLY - before.names() - {"lossless_catch_up_last_run_timestamp_seconds"}
    assert not missing, f"documented but not served: {sorted(missing)}"
    assert before.value("lossless_build_info", version=server.client.get("/healthz").json()["version"]) == 1

    assert server.post("commit-turn", turn("t1", "Staging moved to db-stage-2.", "Noted.")).json()["stored"] == 2
    assert server.post("commit-turn", turn("t2", "The deploy window is Tuesday.", "Right.")).json()["stored"] == 2
    assert server.post("commit-turn", turn("t1", "Staging moved to db-stage-2.", "Noted.")).json()["status"] == (
        "duplicate"
    )
    assert_error(server.post("commit-turn", turn("t3", "x", session_key="no key")), 422, "invalid_session_key")
    unauthorized = httpx.post(f"{server.url}/v1/hooks/commit-turn", json=turn("t4", "y"))
    assert_error(unauthorized, 401, "unauthorized")
    assemble = {"sessionId": "s-main", "sessionKey": "agent:main:main", "prompt": "where is staging now?"}
    assert server.post("assemble", assemble | {"messages": []}).status_code == 200
    assert server.client.get("/v1/search", params={"q": "deploy window", "mode": "keyword"}).status_code == 200

    during = scrape(server)
    assert during.value("lossless_turns_total", outcome="committed") == 2
    assert during.value("lossless_turns_total", outcome="duplicate") == 1
    assert during.value("lossless_turns_total", outcome="refused", reason="invalid_session_key") == 1
    assert during.value("lossless_turns_total", outcome="refused", reason="unauthorized") == 1
    assert during.value("lossless_messages_stored_total", source="commit-turn") == 4
    assert during.value("lossless_backlog_messages") == 4  # the worker is held: nothing embedded yet
    assert during.value("lossless_messages") == 4
    assert during.value("lossless_keyword_fallbacks_total", reason="query_deadline") == 1
    for operation, count in (("commit-turn", 3), ("assemble", 1), ("search", 1)):
        assert during.value("lossless_operation_duration_seconds_count", operation=operation) == count
        assert during.value("lossless_operation_duration_seconds_bucket", operation=operation, le="+Inf") == count
    assemble_route = {"route": "/v1/hooks/assemble", "method": "POST"}
    assert during.value("lossless_http_request_duration_seconds_count", **assemble_route) == 1
    assert during.value("lossless_http_responses_total", **assemble_route, status="200") == 1
    assert during.value("lossless_last_commit_timestamp_seconds", agent="main") > 0
    assert during.value("lossless_embed_batches_total") == 0

    embedder.release.set()
    server.wait_for_backlog()
    drained = scrape(server)
    assert drained.value("lossless_backlog_messages") == 0
    assert drained.value("lossless_embed_batches_total") >= 1
    assert drained.value("lossless_embed_messages_total") == 4
    assert drained.value("lossless_vector_index_vectors") == 4
    if server.settings.database_url is None:
        assert drained.value("lossless_vector_index_bytes") > during.value("lossless_vector_index_bytes")
    else:  # PostgreSQL's vectors are searched in the database: the sidecar holds none of them in memory
        assert drained.value("lossless_vector_index_bytes") == 0

    forgotten = server.client.post("/v1/forget", json={"ids": ["msg:1"]})
    assert forgotten.status_code == 200, forgotten.text
    after = scrape(server)
    assert after.value("lossless_messages_forgotten_total") == 1
    assert after.value("lossless_messages") == 3


def test_metrics_needs_the_token_on_the_main_port(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        assert_error(httpx.get(f"{server.url}/metrics"), 401, "unauthorized")
        wrong = httpx.get(f"{server.url}/metrics", headers={"Authorization": "Bearer not-the-token-at-all"})
        assert_error(wrong, 401, "unauthorized")
        assert "/metrics" not in server.client.get("/openapi.json").json()["paths"]  # not JSON: not in the schema
        assert server.token not in server.client.get("/metrics").text


def _listening(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at ``port``, from /proc."""
    found: set[str] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":  # TCP_LISTEN
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def test_the_metrics_port_serves_metrics_without_the_token_and_nothing_else(tmp_path: Path) -> None:
    metrics_port = free_port()
    state = tmp_path / "state"
    server = SidecarProcess(
        state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}, args=["--metrics-port", str(metrics_port)]
    ).spawn()
    try:
        server.wait_healthy()
        url = f"http://127.0.0.1:{metrics_port}"
        answer = httpx.get(f"{url}/metrics")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain; version=")
        served = Scrape(answer.text)
        assert served.value("lossless_store_readable") == 1
        assert "lossless_turns_total" in served.names()
        assert server.token() not in answer.text
        for path in ("/healthz", "/stats", "/v1/search?q=x", "/openapi.json", "/docs", "/v1/messages/1", "/"):
            assert_error(httpx.get(url + path), 404, "not_found")
            authorised = httpx.get(url + path, headers={"Authorization": f"Bearer {server.token()}"})
            assert_error(authorised, 404, "not_found")
        assert_error(httpx.post(f"{url}/v1/hooks/commit-turn", json=turn("t1", "x")), 404, "not_found")
        assert_error(httpx.post(f"{url}/metrics"), 405, "method_not_allowed")
        assert _listening(metrics_port) == {"127.0.0.1"}

        assert_error(httpx.get(f"{server.url}/metrics"), 401, "unauthorized")  # the main port still wants it
        with server.client() as client:
            assert client.get("/metrics").status_code == 200
    finally:
        server.stop()


def _serve(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--state-dir", str(tmp_path / "s"), *args],
        capture_output=True, text=True, timeout=60,
        env=os.environ | {"LOSSLESS_EMBEDDING_PROVIDER": "none"} | (env or {}),
    )  # fmt: skip


def test_a_non_loopback_metrics_host_is_refused_without_allow_remote(tmp_path: Path) -> None:
    port = str(free_port())
    refused = _serve(tmp_path, "--port", port, "--metrics-port", "0", env={"LOSSLESS_METRICS_HOST": "0.0.0.0"})
    assert refused.returncode == 2, refused.stderr
    assert "not loopback" in refused.stderr and "--allow-remote" in refused.stderr
    assert "Traceback" not in refused.stderr
    same = _serve(tmp_path, "--port", port, "--metrics-port", port)
    assert same.returncode == 2 and "main port" in same.stderr, same.stderr


def test_the_dashboard_is_grafana_json_drawing_documented_series() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    assert len(exprs) >= 8
    used = {re.sub(r"_(bucket|count|sum)$", "", name) for expr in exprs for name in re.findall(r"lossless_\w+", expr)}
    unknown = used - documented()
    assert not unknown, f"the dashboard draws series the docs do not document: {sorted(unknown)}"
