"""End to end against the real OpenClaw gateway (fake model, real plugin, real sidecar), loopback only: the
scenarios of a healthy run. The run itself (one per session, ``driver.py`` inside ``unshare -n``) is the
``report`` fixture of ``conftest.py``; the outage and operator scenarios are in ``test_e2e_outages.py``.

    pytest -m e2e tests/e2e                      # the real sidecar (openclaw-lossless in this venv)
    LOSSLESS_E2E_SIDECAR=stub pytest -m e2e ...  # the stdlib stand-in (tests/e2e/stub_sidecar.py)

Evidence is kept in the test's temp dir (path printed with -s): report.json, gateway.log,
model-requests.jsonl (every request the fake model got), lossless-state/sidecar.log.
"""

from __future__ import annotations

import json

import pytest

from tests.e2e.checks import Report, assert_completed, assert_recalled_not_in_history, only, scenario, with_store
from tests.e2e.gateway import FACT_PROBE, MAIN_KEY, OUTCOME_PROBE, SIDE_KEY

pytestmark = pytest.mark.e2e


def test_engine_selected_and_every_turn_committed(report: Report) -> None:
    result = scenario(report, "selected")
    assert report["gatewayLog"]["degradedLines"] == [], report["gatewayLog"]["degradedLines"]
    assert report["gatewayLog"]["quarantineLines"] == [], report["gatewayLog"]["quarantineLines"]
    assert result["readyLines"], "the gateway log has no '[lossless] sidecar ready' line"
    for turn in result["turns"]:
        assert_completed(turn)
    side = result["sideTurn"]
    # Every turn went through the engine's assemble, and the host used its answer (never its fallback).
    assert result["hookCounts"].get("assemble") == len(result["turns"]) + 1, result["hookCounts"]
    assert result["assembleFallbackLines"] == [], result["assembleFallbackLines"]
    messages = [t["message"] for t in result["turns"]]
    stored = result["storedTexts"]
    assert len(stored) == result["expectedStored"] == 2 * len(messages), stored
    assert stored[0::2] == messages, "user messages stored out of order or not exactly once"
    assert result["sideStoredTexts"][0::2] == [side["message"]], result["sideStoredTexts"]
    assert result["stats"]["turns"] == len(messages) + 1
    assert result["stats"]["messages"] == result["expectedStored"] + 2
    # The sidecar embeds with its local model, loaded and ready (not keyword-only).
    embedder = result["health"]["embedder"]
    assert embedder["configured"] == embedder["active"] == "local" and embedder["ready"], embedder
    assert embedder["model"] and embedder["dimension"], embedder
    # In the first chat nothing lies outside the window, so nothing is recalled: the window the engine chose is
    # the whole history, every earlier message in order.
    for index, turn in enumerate(result["turns"]):
        assert not turn["systemHasRecallHeading"], turn["recalledBlock"]
        where = [next((i for i, text in enumerate(turn["historyTexts"]) if m in text), -1) for m in messages[:index]]
        assert -1 not in where and where == sorted(where), (messages[:index], turn["historyTexts"])
    # A second chat of the same agent: the engine put the first chat's fact into the model's system prompt.
    assert side["sessionKey"] == SIDE_KEY and side["sessionId"] not in (None, result["sessionId"]), side
    assert_recalled_not_in_history(side, FACT_PROBE)
    if with_store(report):
        sessions = {(row["session_id"], row["session_key"]) for row in result["storeSessions"]}
        assert sessions == {(result["sessionId"], MAIN_KEY), (side["sessionId"], SIDE_KEY)}, sessions


def test_the_gateways_sidecar_is_on_the_store_this_pass_names(report: Report, request: pytest.FixtureRequest) -> None:
    """On the suite's PostgreSQL pass the whole run (gateway, sidecar, CLI, the store reads of these checks) is
    on PostgreSQL + pgvector, as a user who sets ``LOSSLESS_DATABASE_URL`` gets; otherwise on SQLite."""
    if not with_store(report):
        pytest.skip("the stub sidecar keeps its store in memory")
    database = scenario(report, "selected")["health"]["database"]
    if request.config.getoption("--store-backend") == "postgresql":
        assert database["backend"] == "postgresql" and database["vectorExtension"].startswith("pgvector "), database
    else:
        assert database["backend"] == "sqlite" and database["vectorExtension"].startswith("sqlite-vec "), database


def test_fact_survives_compaction(report: Report) -> None:
    result = scenario(report, "compaction")
    compact = result["compact"]
    assert compact["rc"] == 0 and compact["result"]["ok"] and compact["result"]["compacted"], compact
    assert result["compactionReplies"], "the host never asked the fake model for a summary"
    host = compact["result"]["result"]
    assert FACT_PROBE not in host["summary"]
    assert result["storeCompactions"] == 1, "the compaction was not recorded in the sidecar"
    question = result["question"]
    assert any("compacted into the following summary" in text for text in question["historyTexts"])
    assert_recalled_not_in_history(question, FACT_PROBE)
    if with_store(report):
        # The sidecar recorded this compaction, of this session, with the host's own numbers and summary.
        row = only(result["storeCompactionRows"], "compaction row")
        assert (row["sessionId"], row["sessionKey"]) == (question["sessionId"], MAIN_KEY), row
        assert row["compacted"] == 1, row
        assert row["tokensBefore"] == host["tokensBefore"] > 0, (row, host)
        assert row["tokensAfter"] == host["tokensAfter"] and row["tokensAfter"] < row["tokensBefore"], (row, host)
        assert row["summary"] == host["summary"] and "## " in row["summary"], row


def test_recall_across_new_session(report: Report) -> None:
    result = scenario(report, "newSession")
    before = result["sessionIdBefore"]
    # A typed /new resets agent:main:main in place on OpenClaw 2026.9.6 (the driver's scenario says where in its
    # code): the same sessionId, an empty history, and the fact comes back only through recall.
    typed, in_place = result["typedNew"], result["inPlaceQuestion"]
    assert typed["rc"] == 0 and typed["status"] == "ok", typed
    assert typed["sessionId"] == in_place["sessionId"] == before, (typed, in_place["sessionId"], before)
    assert len(in_place["historyTexts"]) <= 2, "the history was not reset"
    assert_recalled_not_in_history(in_place, FACT_PROBE)
    # The Control UI's /new: a new session (new key, new sessionId) whose first turn recalls the old fact.
    question, new_key = result["question"], result["newKey"]
    assert new_key.startswith("agent:main:dashboard:"), result["created"]
    assert question["sessionKey"] == new_key
    assert question["sessionId"] == result["created"]["entry"]["sessionId"] != before, (question, before)
    assert len(question["historyTexts"]) <= 2, "the new session's history is not empty"
    assert_recalled_not_in_history(question, FACT_PROBE)
    assert not any(FACT_PROBE in text for text in result["newSessionStoredTexts"])
    if with_store(report):
        # The fact is stored under the old session only; the new session's turn under a session row of its own.
        facts = result["factRows"]
        assert facts and {(r["sessionId"], r["sessionKey"]) for r in facts} == {(before, MAIN_KEY)}, facts
        asked = only(result["questionRows"], "stored copy of the new session's question")
        assert (asked["sessionId"], asked["sessionKey"], asked["role"]) == (question["sessionId"], new_key, "user")
        assert asked["sessionRow"] not in {r["sessionRow"] for r in facts}, (asked, facts)
        # The in-place reset kept the session: its turn is stored under the fact's session row.
        assert {r["sessionRow"] for r in result["inPlaceRows"]} == {r["sessionRow"] for r in facts}


def test_agent_tools_offered_and_answering_in_the_real_host(report: Report) -> None:
    result = scenario(report, "agentTools")
    assert_completed(result["turn"])
    assert result["toolsOffered"] == ["lossless_recover", "lossless_search"], result["toolsOffered"]
    assert result["replyKinds"][:2] == ["search", "searched"], result["replyKinds"]
    answer = "\n".join(result["toolResults"])
    assert FACT_PROBE in answer and "[msg:" in answer, answer[:2000]
    assert "not instructions" in answer


def test_subagent_linked_and_outcome_recallable(report: Report) -> None:
    result = scenario(report, "subagents")
    assert "spawn" in result["spawnReplyKinds"], "the fake model did not spawn a child"
    assert result["settled"], "the child run did not finish"
    children = result["children"]
    assert len(children) == 1, children
    child = children[0]
    assert child["key"].startswith("agent:main:subagent:") and child["parentSessionKey"] == "agent:main:main"
    assert result["childRunRequests"] >= 1
    child_texts = result["childStoredTexts"][child["key"]]
    assert any(OUTCOME_PROBE in text for text in child_texts), "the child's turn was not committed"
    assert result["storeSubagents"] == 1, "the child was not linked to its parent"
    assert any(OUTCOME_PROBE in text for text in result["parentStoredTexts"]), "no outcome in the parent"
    assert_recalled_not_in_history(result["question"], OUTCOME_PROBE)
    if with_store(report):
        # The link row: parent key -> child key, ended with the host's reason.
        link = only(result["storeLinks"], "subagent link")
        assert (link["parentKey"], link["childKey"]) == (MAIN_KEY, child["key"]), link
        assert link["endedAt"] is not None and link["endedReason"] == "completed", link
        # The outcome records copied into the parent's session, each citing the child's message it copies.
        outcomes = result["storeOutcomes"]
        assert outcomes, "no outcome record was copied into the parent"
        for outcome in outcomes:
            assert (outcome["sessionId"], outcome["sessionKey"]) == (result["parentSessionId"], MAIN_KEY), outcome
            cites = f"msg:{outcome['cites']}"
            original = {"kind": "subagentOutcome", "childSessionKey": child["key"], "cites": cites}
            assert json.loads(outcome["original"]) == original, outcome
            assert outcome["citedSessionKey"] == child["key"], outcome
            assert outcome["text"] == f"[subagent result] {outcome['citedText']}", outcome
        assert any(o["citedRole"] == "assistant" and OUTCOME_PROBE in o["citedText"] for o in outcomes), outcomes


def test_import_reads_the_real_gateways_transcript_store(report: Report) -> None:
    result = scenario(report, "importReal")
    assert result["agentDatabases"], "the gateway kept no openclaw-agent.sqlite"
    first, again = result["first"], result["again"]
    assert "rc" not in first, first
    assert first["errors"] == 0 and first["skipped_malformed"] == 0, first
    assert any(d["kind"] == "sqlite" and d["agent_id"] == "main" for d in first["details"]), first["details"]
    # Every message the plugin captured live is in OpenClaw's own transcripts too (plus the host's own).
    assert first["messages_imported"] >= 0.8 * result["liveMessages"], (first, result["liveMessages"])
    assert first["compactions"] >= 1, "the host's compaction entry was not recorded"
    # A second run brings in nothing twice: only what the live gateway wrote while the imports ran.
    written = result["eventsWrittenDuringImports"]
    assert again["messages_imported"] + again["compactions"] <= written, (again, written)
    hits = result["search"]["hits"]
    assert hits and FACT_PROBE in hits[0]["text"], hits
