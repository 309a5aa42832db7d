"""The plugin's agent tools (lossless_search, lossless_recover) run by Node against the real sidecar over HTTP.

The tools are built the way OpenClaw builds them (the plugin's ``register`` with a host-like ``api``, then the
tool factory with a run's tool context) and executed against a live sidecar whose store was filled through its
hooks. ``lossless_recover`` reads ``GET /v1/messages/{id}?context=N``.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.conversation import FACT, commit_body, conversation
from tests.e2e.test_plugin_contract import require_node
from tests.helpers import LiveSidecar

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "plugin" / "test" / "fixtures" / "drive-tools.mjs"
OPS_FACT = "The ops on-call rota lives in the shared pager spreadsheet, tab three."


def fill(server: LiveSidecar) -> None:
    for turn in conversation(20, session="s-main"):
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    ops = {
        "advancementKey": "ops-1",
        "sessionId": "s-ops",
        "sessionKey": "agent:ops:main",
        "messages": [{"role": "user", "content": OPS_FACT, "timestamp": 1_767_225_600_000}],
    }
    assert server.post("commit-turn", ops).json()["status"] == "committed"
    server.wait_for_backlog()


def run_tools(
    server: LiveSidecar, tool_context: dict[str, Any], calls: list[tuple[str, dict[str, Any]]]
) -> list[dict[str, Any]]:
    """Register the plugin with a host-like api, build the tools for ``tool_context`` and run ``calls``."""
    config = {"sidecarUrl": server.url, "stateDir": str(server.settings.state_dir), "autoStart": False}
    done = subprocess.run(
        [require_node(), str(DRIVER)],
        input=json.dumps({"config": config, "context": tool_context, "calls": calls}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    # lossless_forget is declared with the others and built only when the operator sets agentMayForget.
    assert out["registrations"] == [{"names": ["lossless_search", "lossless_recover", "lossless_forget"]}]
    results: list[dict[str, Any]] = out["results"]
    return results


RUN = {"agentId": "main", "sessionKey": "agent:main:main", "sessionId": "s-main"}


def test_lossless_search_finds_cited_snippets_in_the_agents_own_history(sidecar: LiveSidecar) -> None:
    fill(sidecar)
    own, ops, everything, session = run_tools(
        sidecar,
        RUN,
        [
            ("lossless_search", {"query": "staging database password rotates", "k": 3}),
            ("lossless_search", {"query": "on-call rota pager spreadsheet"}),
            ("lossless_search", {"query": "on-call rota pager spreadsheet", "scope": "all"}),
            ("lossless_search", {"query": "staging password", "scope": "session"}),
        ],
    )
    direct = sidecar.client.get(
        "/v1/search", params={"q": "staging database password rotates", "scope": "agent:main", "k": 3}
    ).json()
    details = own["result"]["details"]
    assert details["scope"] == "agent:main"
    assert [h["citation"] for h in details["hits"]] == [h["citation"] for h in direct["hits"]]
    best = details["hits"][0]
    assert best["snippet"] == FACT and best["sessionId"] == "s-main" and best["agentId"] == "main"
    text = own["result"]["content"][0]["text"]
    assert "not instructions" in text
    assert f"[{best['citation']}] " in text and f"\n> {FACT}" in text

    # The default scope is the calling agent's own: another agent's fact is found only with scope 'all'.
    assert all(h["agentId"] == "main" for h in ops["result"]["details"]["hits"])
    assert OPS_FACT not in json.dumps(ops["result"])
    assert everything["result"]["details"]["hits"][0]["snippet"] == OPS_FACT
    assert session["result"]["details"]["scope"] == "session:s-main"
    assert session["result"]["details"]["hits"][0]["snippet"] == FACT


def test_lossless_recover_returns_the_cited_message_with_its_neighbours(sidecar: LiveSidecar) -> None:
    fill(sidecar)
    hit = sidecar.client.get("/v1/search", params={"q": FACT, "k": 1}).json()["hits"][0]
    assert hit["text"] == FACT
    recovered, edge, missing, bad = run_tools(
        sidecar,
        RUN,
        [
            ("lossless_recover", {"citation": hit["citation"], "context": 2}),
            ("lossless_recover", {"citation": "msg:1", "context": 2}),
            ("lossless_recover", {"citation": "msg:999999"}),
            ("lossless_recover", {"citation": "the staging one"}),
        ],
    )
    details = recovered["result"]["details"]
    assert details["citation"] == hit["citation"]
    assert details["message"]["text"] == FACT
    assert details["sessionId"] == "s-main" and details["agentId"] == "main"
    # The fact is turn FACT_TURN's user message: the previous turn before it, its answer and the next ask after.
    assert [m["id"] for m in details["before"]] == [hit["id"] - 2, hit["id"] - 1]
    assert [m["id"] for m in details["after"]] == [hit["id"] + 1, hit["id"] + 2]
    assert details["after"][0]["text"] == "Noted: staging rotation is on Tuesdays."
    text = recovered["result"]["content"][0]["text"]
    assert f"THE CITED MESSAGE: [{hit['citation']}]" in text and f"> {FACT}" in text and "not instructions" in text

    assert edge["result"]["details"]["before"] == []  # the session's first message has nothing before it
    assert [m["id"] for m in edge["result"]["details"]["after"]] == [2, 3]
    assert missing["error"]["code"] == "not_found" and "msg:999999" in missing["error"]["message"]
    assert bad["error"]["name"] == "ToolParamError"


def test_the_message_endpoint_answers_citations_and_speaks_the_error_shape(sidecar: LiveSidecar) -> None:
    fill(sidecar)
    found = sidecar.client.get("/v1/messages/1", params={"context": 0}).json()
    assert found["message"]["citation"] == "msg:1" and found["before"] == found["after"] == []
    assert found["message"]["original"]["role"] == "user"
    assert found["sessionKey"] == "agent:main:main"
    missing = sidecar.client.get("/v1/messages/424242")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"
    assert sidecar.client.get("/v1/messages/1", params={"context": 51}).status_code == 422
    assert sidecar.client.get("/v1/messages/0").status_code == 422
