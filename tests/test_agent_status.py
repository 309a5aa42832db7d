"""Per-agent activity over real HTTP: /healthz and /stats show each agent's last commit and assemble, and the
``/lossless`` command's endpoints answer an agent's status and its last recall with the trace."""

from __future__ import annotations

import re
import sqlite3
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.store.sqlite.agents import LAST_COMMITS_SQL
from tests.conversation import FACT, QUESTION, commit_body, conversation, history
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, live_sidecar, make_settings

ISO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
SECRET = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 3


def commit(server: LiveSidecar, key: str, text: str, session: str = "s-main", agent: str = "main") -> None:
    body = {
        "advancementKey": key,
        "sessionId": session,
        "sessionKey": f"agent:{agent}:main",
        "messages": [{"role": "user", "content": text}, {"role": "assistant", "content": "noted"}],
    }
    assert server.post("commit-turn", body).json()["status"] == "committed"


def assemble(server: LiveSidecar, prompt: str, session: str = "s-main", agent: str = "main") -> dict[str, Any]:
    body = {"sessionId": session, "sessionKey": f"agent:{agent}:main", "messages": [], "prompt": prompt}
    response = server.post("assemble", body)
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


def test_healthz_and_stats_show_each_agents_last_commit_and_assemble(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        assert server.client.get("/healthz").json()["agents"] == {}
        commit(server, "k1", "the blue kettle is in the attic", agent="main")
        commit(server, "k2", "ops notes", session="s-ops", agent="ops")
        assemble(server, "where is the blue kettle?", agent="main")

        agents = server.client.get("/healthz").json()["agents"]
        assert set(agents) == {"main", "ops"}
        assert ISO.match(agents["main"]["lastCommitAt"]) and ISO.match(agents["main"]["lastAssembleAt"])
        assert ISO.match(agents["ops"]["lastCommitAt"]) and agents["ops"]["lastAssembleAt"] is None
        assert agents["main"]["lastAssembleAt"] >= agents["main"]["lastCommitAt"]

        stats = server.client.get("/stats").json()
        assert stats["agents"] == 2  # the count stays what it was
        assert stats["agentActivity"] == agents

        # A replayed turn stores nothing and is not a new commit.
        before = server.client.get("/healthz").json()["agents"]["ops"]["lastCommitAt"]
        body = {"advancementKey": "k2", "sessionId": "s-ops", "sessionKey": "agent:ops:main", "messages": []}
        assert server.post("commit-turn", body).json()["status"] == "duplicate"
        assert server.client.get("/healthz").json()["agents"]["ops"]["lastCommitAt"] == before


def test_the_last_commit_per_agent_is_known_again_after_a_restart(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, "k1", "first", agent="main")
        commit(server, "k2", "second", session="s-ops", agent="ops")
        before = server.client.get("/healthz").json()["agents"]
    with live_sidecar(settings, HashEmbedder()) as server:
        after = server.client.get("/healthz").json()["agents"]
        assert set(after) == set(before) == {"main", "ops"}
        for agent in after:  # the store's commit time, taken inside the transaction: the same to a few ms
            moved = datetime.fromisoformat(after[agent]["lastCommitAt"]) - datetime.fromisoformat(
                before[agent]["lastCommitAt"]
            )
            assert abs(moved.total_seconds()) < 1, (agent, before, after)
        assert {v["lastAssembleAt"] for v in after.values()} == {None}  # not persisted: none since this start


@pytest.mark.sqlite_only  # SQLite's query planner on the SQLite module's statement
def test_the_last_commits_are_read_back_through_indexes_not_a_scan_of_the_turns(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder()) as server:
        commit(server, "k1", "first")
    conn = sqlite3.connect(settings.database_path)
    try:
        plan = " | ".join(str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {LAST_COMMITS_SQL}"))
    finally:
        conn.close()
    assert "turns_by_session" in plan, plan
    assert "SCAN t" not in plan and "SCAN turns" not in plan, plan


def test_agent_status_answers_what_lossless_shows(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        turns = conversation(12)
        for turn in turns:
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        status = server.client.get("/v1/agents/main/status").json()
        assert status["agentId"] == "main" and status["messages"] == 24 and status["sessions"] == 1
        assert ISO.match(status["lastCommitAt"]) and status["lastAssembleAt"] is None and status["lastRecall"] is None
        assert status["backlog"] == 0 and status["embedder"]["ready"] is True
        assert status["version"] == server.client.get("/healthz").json()["version"]
        assert set(status["catchUp"]) == set(server.client.get("/stats").json()["catchUp"])  # /stats' catchUp

        answer = assemble(server, QUESTION)
        recall = server.client.get("/v1/agents/main/status").json()["lastRecall"]
        assert recall["sessionId"] == "s-main" and ISO.match(recall["at"])
        assert recall["lines"] == len(answer["recalled"]) > 0
        assert recall["hits"] + recall["neighbours"] == recall["lines"]


def test_last_recall_is_the_block_the_host_got_with_why_each_candidate_was_kept_or_dropped(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        assert server.client.get("/v1/agents/main/last-recall").status_code == 404  # nothing seen yet
        turns = conversation(30)
        for turn in turns:
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        assert server.client.get("/v1/agents/main/last-recall").json() == {"agentId": "main", "recall": None}

        window = history(turns[-2:])
        body = {"sessionId": "s-main", "sessionKey": "agent:main:main", "messages": window, "prompt": QUESTION}
        answer = server.post("assemble", body | {"trace": True, "config": {"recallTokenBudget": 300}}).json()
        recall = server.client.get("/v1/agents/main/last-recall").json()["recall"]

        assert recall["block"] == answer["systemPromptAddition"] and "rotates every Tuesday" in recall["block"]
        assert [{k: v for k, v in item.items() if v is not None} for item in recall["recalled"]] == answer["recalled"]
        assert recall["trace"] == answer["trace"]["candidates"]
        decisions = {c["decision"] for c in recall["trace"]}
        assert {"kept", "over_budget"} <= decisions, decisions
        assert recall["decisions"]["kept"] == sum(1 for c in recall["trace"] if c["decision"] == "kept")
        kept = next(c for c in recall["trace"] if c["decision"] == "kept")
        assert {"similarity", "relevance", "recency", "weight", "score", "cosine", "keyword", "lanes"} <= set(kept)
        # Another agent's last recall is its own.
        commit(server, "o1", "ops notes", session="s-ops", agent="ops")
        assert server.client.get("/v1/agents/ops/last-recall").json()["recall"] is None


def test_a_recall_keeps_no_secret_the_prompt_held(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        commit(server, "k1", f"{FACT} The deploy key was {SECRET}.")
        server.wait_for_backlog()
        assemble(server, f"staging database password rotate? my key is {SECRET}")
        recall = server.client.get("/v1/agents/main/last-recall").text
        assert "rotates every Tuesday" in recall
        assert SECRET not in recall and "[REDACTED:" in recall


def test_bad_and_unknown_agent_ids_get_the_error_shape_and_change_nothing(tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        commit(server, "k1", "first")
        for path in ("status", "last-recall"):
            body = assert_error(server.client.get(f"/v1/agents/-bad/{path}"), 422, "invalid_request")
            assert "agent id" in body["error"]["message"]
            body = assert_error(server.client.get(f"/v1/agents/nobody/{path}"), 404, "not_found")
            assert "import --agent nobody" in body["error"]["message"]
            assert_error(server.client.get(f"/v1/agents/{'a' * 129}/{path}"), 422, "invalid_request")
        unauthenticated = server.client.get("/v1/agents/main/status", headers={"Authorization": ""})
        assert_error(unauthenticated, 401, "unauthorized")
        assert server.client.get("/stats").json()["messages"] == 2


def test_the_plugins_fixture_has_the_shape_of_the_real_answers(tmp_path: Path) -> None:
    """plugin/test/command.test.mjs replays answers saved from this sidecar: they must not drift from it."""
    import json

    saved = json.loads((Path(__file__).parents[1] / "plugin/test/fixtures/agent-answers.json").read_text())
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        for turn in conversation(6):
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        assemble(server, QUESTION)
        status = server.client.get("/v1/agents/main/status").json()
        recall = server.client.get("/v1/agents/main/last-recall").json()
        unknown = server.client.get("/v1/agents/nobody/status").json()
        search = server.client.get("/v1/search", params={"q": "staging password", "scope": "agent:main"}).json()
    assert set(saved["status"]) == set(status)
    assert set(saved["status"]["lastRecall"]) == set(status["lastRecall"])
    assert set(saved["status"]["embedder"]) == set(status["embedder"])
    assert set(saved["lastRecall"]["recall"]) == set(recall["recall"])
    assert set(saved["lastRecall"]["recall"]["trace"][0]) <= set(recall["recall"]["trace"][0])  # what it reads
    assert set(saved["unknownAgent"]["error"]) == set(unknown["error"])
    assert set(saved["search"]) == set(search) and set(saved["search"]["hits"][0]) == set(search["hits"][0])
