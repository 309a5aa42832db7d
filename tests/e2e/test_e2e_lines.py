"""The other maintained OpenClaw lines, end to end: a lean run of the real gateway on the newest release of each.

The full run (``test_e2e_openclaw.py``, ``test_e2e_outages.py``) is on the version ``install.sh`` pins. Here each
other line the registry serves (``LOSSLESS_E2E_LINES``, comma-separated, default 2026.7.35 and 2026.8.2; empty:
none) gets its own install cache (``~/.cache/openclaw-lossless-e2e-<version>``) and one driver run of four
scenarios: plain use, compaction, a typed ``/new``, and a sidecar killed with turns (a tool call, a subagent)
during the outage. The lines run once, on the suite's SQLite pass. docs/openclaw-versions.md says what differs.
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.checks import (
    Report,
    assert_completed,
    assert_recalled_not_in_history,
    assert_silent_outage_trimmed_and_spooled,
    scenario,
)
from tests.e2e.conftest import drive
from tests.e2e.gateway import FACT_PROBE, host_at_least

pytestmark = pytest.mark.e2e

LINES = [v.strip() for v in os.environ.get("LOSSLESS_E2E_LINES", "2026.7.35,2026.8.2").split(",") if v.strip()]
LEAN = ["selected", "compaction", "typedNew", "outageByPlugin"]
OVERFLOW = "outageOverflow"  # played on the newest of LINES only: the trim is the plugin's, the same on every line
DURABLE_TURNS = (2026, 8, 1)  # commitTurn and its outbox; before, afterTurn once per run


@pytest.fixture(scope="session", params=LINES)
def line(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, suite_database: str | None
) -> tuple[str, Report]:
    if request.config.getoption("--store-backend") == "postgresql":
        pytest.skip("the other OpenClaw lines run once, on the suite's SQLite pass")
    version = str(request.param)
    return version, drive(tmp_path_factory, None, version, LEAN + ([OVERFLOW] if version == LINES[-1] else []))


def test_the_plugin_installs_and_the_engine_is_never_degraded_nor_quarantined(line: tuple[str, Report]) -> None:
    version, report = line
    print(f"OpenClaw {version}: install {report['installSeconds']} s, run {report['timings'].get('total')} s")
    assert report["pluginInstall"]["rc"] == 0, report["pluginInstall"]
    assert report["gatewayLog"]["degradedLines"] == [], report["gatewayLog"]["degradedLines"]
    assert report["gatewayLog"]["quarantineLinesAll"] == [], report["gatewayLog"]["quarantineLinesAll"]


def test_plain_use_stores_every_turn_once_and_recalls_across_chats(line: tuple[str, Report]) -> None:
    version, report = line
    result = scenario(report, "selected")
    for turn in result["turns"]:
        assert_completed(turn)
    assert result["assembleFallbackLines"] == [], result["assembleFallbackLines"]
    counts = result["hookCounts"]
    assert counts.get("assemble") == len(result["turns"]) + 1, counts
    if host_at_least(version, DURABLE_TURNS):
        assert counts.get("commit-turn") == len(result["turns"]) + 1, counts
    else:
        assert not counts.get("commit-turn"), counts  # afterTurn stored them (from the transcript file)
    messages = [t["message"] for t in result["turns"]]
    stored = result["storedTexts"]
    assert len(stored) == 2 * len(messages) and stored[0::2] == messages, stored
    assert_recalled_not_in_history(result["sideTurn"], FACT_PROBE)


def test_a_fact_survives_compaction(line: tuple[str, Report]) -> None:
    version, report = line
    result = scenario(report, "compaction")
    compact = result["compact"]
    assert compact["rc"] == 0 and compact["result"]["ok"] and compact["result"]["compacted"], compact
    assert result["storeCompactions"] == 1, "the compaction was not recorded in the sidecar"
    assert FACT_PROBE not in compact["result"]["result"]["summary"]
    question = result["question"]
    if host_at_least(version, DURABLE_TURNS):
        assert_recalled_not_in_history(question, FACT_PROBE)
    else:
        # 2026.7's delegated `sessions compact` keeps the recent tail (here the whole short session: its
        # firstKeptEntryId is the first message), so the fact stays in the host's history; the model still has it.
        assert_completed(question)
        assert any(FACT_PROBE in text for text in question["historyTexts"]) or FACT_PROBE in question["recalledBlock"]


def test_a_fact_survives_a_typed_new(line: tuple[str, Report]) -> None:
    _, report = line
    result = scenario(report, "typedNew")
    typed = result["typedNew"]
    assert typed["rc"] == 0 and typed["status"] == "ok", typed  # answered by the host, not the model
    question = result["question"]
    assert len(question["historyTexts"]) <= 2, "the history was not reset"
    assert_recalled_not_in_history(question, FACT_PROBE)
    assert result["factRows"], "the fact is not in the store"


def test_a_sidecar_kill_with_turns_during_the_outage_is_caught_up_exactly_once(line: tuple[str, Report]) -> None:
    _, report = line
    result = scenario(report, "outageByPlugin")
    assert result["killedPid"] > 0 and len(result["pluginStartLines"]) == 1, result["losslessLines"]
    for turn in result["turns"]:
        assert turn["rc"] == 0 and turn["status"] == "ok" and turn["foundRequest"], turn
    kinds = [kind for turn in result["turns"] for kind in turn["replyKinds"]]
    assert "status" in kinds and "spawn" in kinds, kinds
    assert result["subagentsSettled"] and result["sidecarBack"], result["losslessLines"]
    audit = result["audit"]
    assert audit["hostMessages"] > 0 and audit["hostRowsUnread"] == 0, audit
    assert audit["missing"] == [], audit["missing"][:10]
    assert audit["duplicated"] == [], audit["duplicated"][:10]
    assert audit["storeOnly"] == [], audit["storeOnly"][:10]
    assert any(":subagent:" in str(key) for key in audit["hostSessions"].values()), audit["hostSessions"]
    assert result["converged"], audit


def test_an_overflowing_history_is_trimmed_to_the_budget_while_the_sidecar_is_silent(line: tuple[str, Report]) -> None:
    version, report = line
    if version != LINES[-1]:
        pytest.skip(f"played on {LINES[-1]} only")
    assert_silent_outage_trimmed_and_spooled(report, scenario(report, OVERFLOW))
