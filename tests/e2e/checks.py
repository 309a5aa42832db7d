"""What the e2e tests check on the driver's report, shared by the test modules."""

from __future__ import annotations

from typing import Any

Report = dict[str, Any]


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


def only(rows: list[Any], what: str) -> Any:
    """The one row `rows` must hold, or a failure that shows them all."""
    assert len(rows) == 1, f"expected exactly one {what}, got {len(rows)}: {rows}"
    return rows[0]


def with_store(report: Report) -> bool:
    """Whether store-side evidence was read: always with the real sidecar (the stub keeps no SQLite store)."""
    return bool(report["sidecarMode"] != "stub")
