"""End to end against the real OpenClaw gateway (fake model, real plugin, real sidecar), loopback only.

One driver run (``driver.py`` inside ``unshare -n``) plays every scenario and writes a report; each test
below asserts one scenario on it. First run installs OpenClaw into a cache (``install.sh``, ~1 min,
~850 MB); a whole run takes ~3 minutes.

    pytest -m e2e tests/e2e                      # the real sidecar (openclaw-lossless in this venv)
    LOSSLESS_E2E_SIDECAR=stub pytest -m e2e ...  # the stdlib stand-in (tests/e2e/stub_sidecar.py)

Evidence is kept in the test's temp dir (path printed on failure): report.json, gateway.log,
model-requests.jsonl (every request the fake model got), lossless-state/sidecar.log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.driver import DOWN_PROBE, FACT_PROBE, OUTCOME_PROBE
from tests.e2e.prerequisites import unavailable

pytestmark = pytest.mark.e2e

HERE = Path(__file__).resolve().parent
Report = dict[str, Any]


def unshare_prefix() -> list[str] | None:
    """The command prefix that gives a private network namespace here, or None when none is permitted."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    return None


def install_openclaw() -> Path:
    done = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True, timeout=1200, check=False)
    if done.returncode != 0:
        pytest.fail(f"install.sh failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Report:
    prefix = unshare_prefix()
    if prefix is None:
        unavailable(
            "a private network namespace (`unshare -n` or `unshare -rn`) is not permitted here; the e2e needs one"
        )
    mode = os.environ.get("LOSSLESS_E2E_SIDECAR", "real")
    venv_bin = Path(sys.prefix) / "bin"
    if mode == "real" and not (venv_bin / "openclaw-lossless").exists():
        pytest.fail(f"openclaw-lossless is not installed in {venv_bin} (pip install -e .)")
    cache = install_openclaw()
    workdir = tmp_path_factory.mktemp("openclaw-e2e")
    report_path = workdir / "report.json"
    env = {**os.environ, "LOSSLESS_E2E_OUTER_NETNS": os.readlink("/proc/self/ns/net")}
    command = [*prefix, sys.executable, str(HERE / "driver.py"), "--cache", str(cache), "--workdir", str(workdir),
               "--report", str(report_path), "--venv-bin", str(venv_bin), "--sidecar", mode]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, env=env, check=False)
    if not report_path.exists():
        pytest.fail(f"the driver wrote no report (rc={done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    data: Report = json.loads(report_path.read_text())
    print(f"e2e evidence in {workdir}; timings {data.get('timings')}")
    if data.get("setupError"):
        pytest.fail(f"setup failed: {data['setupError']}\n{data.get('setupTrace', '')}\nevidence: {workdir}")
    return data


def scenario(report: Report, name: str) -> Report:
    result: Report = report["scenarios"][name]
    assert result["ok"], f"{name} raised: {result.get('error')}\n{result.get('trace')}\nevidence: {report['workdir']}"
    return result


def assert_completed(turn: Report) -> None:
    assert turn["rc"] == 0 and turn["status"] == "ok", turn
    assert turn["foundRequest"], f"the fake model never saw {turn['message']!r}"


def assert_recalled_not_in_history(turn: Report, probe: str) -> None:
    assert_completed(turn)
    assert turn["systemHasRecallHeading"], "no Recalled Context block in the model's system prompt"
    assert probe in turn["recalledBlock"], turn["recalledBlock"]
    assert not any(probe in text for text in turn["historyTexts"]), "the host's own history still holds the fact"


def test_engine_selected_and_every_turn_committed(report: Report) -> None:
    result = scenario(report, "selected")
    assert report["gatewayLog"]["degradedLines"] == [], report["gatewayLog"]["degradedLines"]
    assert report["gatewayLog"]["quarantineLines"] == [], report["gatewayLog"]["quarantineLines"]
    for turn in result["turns"]:
        assert_completed(turn)
    # Every turn went through the engine's assemble (nothing to recall yet, so no block in the prompt).
    assert result["hookCounts"].get("assemble") == len(result["turns"]), result["hookCounts"]
    messages = [t["message"] for t in result["turns"]]
    stored = result["storedTexts"]
    assert len(stored) == result["expectedStored"] == 2 * len(messages), stored
    assert stored[0::2] == messages, "user messages stored out of order or not exactly once"
    assert result["stats"]["turns"] == len(messages)
    assert result["stats"]["messages"] == result["expectedStored"]


def test_fact_survives_compaction(report: Report) -> None:
    result = scenario(report, "compaction")
    compact = result["compact"]
    assert compact["rc"] == 0 and compact["result"]["ok"] and compact["result"]["compacted"], compact
    assert result["compactionReplies"], "the host never asked the fake model for a summary"
    assert FACT_PROBE not in compact["result"]["result"]["summary"]
    assert result["storeCompactions"] >= 1, "the compaction was not recorded in the sidecar"
    question = result["question"]
    assert any("compacted into the following summary" in text for text in question["historyTexts"])
    assert_recalled_not_in_history(question, FACT_PROBE)


def test_recall_across_new_session(report: Report) -> None:
    result = scenario(report, "newSession")
    assert result["reset"]["ok"], result["reset"]
    question = result["question"]
    assert len(question["historyTexts"]) <= 2, "the history was not reset"
    assert_recalled_not_in_history(question, FACT_PROBE)


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
    assert result["storeSubagents"] >= 1, "the child was not linked to its parent"
    assert any(OUTCOME_PROBE in text for text in result["parentStoredTexts"]), "no outcome in the parent"
    assert_recalled_not_in_history(result["question"], OUTCOME_PROBE)


def test_sidecar_down_then_back(report: Report) -> None:
    result = scenario(report, "sidecarDown")
    assert result["killedPid"] > 0 and result["sidecarGone"]
    down = result["downTurn"]
    assert_completed(down)
    assert not down["systemHasRecallHeading"], "with the sidecar down the host should fall back to its pipeline"
    assert result["stillDownAfterTurn"], "the shim restarted the sidecar (autoStart is once per process)"
    assert result["queuedLines"], "the host did not keep the failed commit in its outbox"
    assert result["restarted"]
    assert_completed(result["afterTurn"])
    assert result["afterTurn"]["systemHasRecallHeading"]
    assert result["downFactStoredCount"] == 1, result["storedTexts"]
    assert result["afterStoredCount"] == 1, result["storedTexts"]
    assert DOWN_PROBE in " ".join(result["storedTexts"])


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
    assert again["messages_imported"] == 0 and again["compactions"] == 0, again
    hits = result["search"]["hits"]
    assert hits and FACT_PROBE in hits[0]["text"], hits
