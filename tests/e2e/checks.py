"""What the e2e tests check on the driver's report, shared by the test modules."""

from __future__ import annotations

from typing import Any

import pytest

Report = dict[str, Any]


def scenario(report: Report, name: str) -> Report:
    """The scenario's result, asserted to have run without raising; a skip if this pass does not play it."""
    if name in report.get("notPlayed", ()):
        pytest.skip(f"{name} is not played on this pass (driver.SQLITE_PASS_ONLY)")
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


def only(rows: list[Any], what: str) -> Any:
    """The one row `rows` must hold, or a failure that shows them all."""
    assert len(rows) == 1, f"expected exactly one {what}, got {len(rows)}: {rows}"
    return rows[0]


def with_store(report: Report) -> bool:
    """Whether store-side evidence was read: always with the real sidecar (the stub keeps no SQLite store)."""
    return bool(report["sidecarMode"] != "stub")


def assert_silent_outage_trimmed_and_spooled(report: Report, result: Report) -> None:
    """``outageOverflow``: every turn while the sidecar was silent went through the plugin's assemble (none ran on
    the host's legacy engine) and gave the model no more history than the budget; each was spooled, and once
    the sidecar answered every spooled turn was committed and the store holds every host message exactly once."""
    turns, budgets = result["turns"], result["budgets"]  # [kept, of, tokens, budget] per "assemble without ..."
    assert len(turns) >= 3 and len(budgets) >= len(turns), result["trimmedLines"]
    assert result["degradedLines"] == [], result["degradedLines"]
    for turn, (kept, total, _, budget) in zip(turns, budgets, strict=False):
        assert_completed(turn)
        assert kept < total, (kept, total)  # trimmed: the host's own history would not have fit
        assert result["hostHistoryTokens"] > budget, (result["hostHistoryTokens"], budget)
        assert turn["historyTokens"] <= budget, (turn, budget)  # what the model got
    assert result["spooledWhileSilent"] == len(turns), (result["spooledWhileSilent"], result["spooledLines"])
    assert_completed(result["after"])
    assert result["sentLines"] and result["spoolLeft"] == 0, (result["sentLines"], result["spoolLeft"])
    if with_store(report):
        assert result["spooledCommitted"] is not None and len(result["spooledCommitted"]) == len(turns), result
        audit = result["audit"]
        assert audit["missing"] == [] and audit["duplicated"] == [], (audit["missing"][:5], audit["duplicated"][:5])
        assert audit["storeOnly"] == [], audit["storeOnly"][:5]
        assert result["converged"], audit
