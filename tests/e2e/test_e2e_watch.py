"""End to end against the real OpenClaw gateway: watch mode with ``legacy`` selected, then lossless again.

The same run as ``test_e2e_openclaw.py`` (the ``report`` fixture of ``conftest.py``), its last scenario.
"""

from __future__ import annotations

import pytest

from tests.e2e.checks import Report, scenario, with_store
from tests.e2e.scenarios_watch import TURN_WAIT, TURNS
from tests.e2e.test_e2e_outages import assert_every_host_message_stored_once

pytestmark = pytest.mark.e2e


def test_with_legacy_selected_every_turn_is_stored_within_seconds_and_searchable(report: Report) -> None:
    result = scenario(report, "watchMode")
    assert result["serveUp"] and result["watching"] == ["openclaw"], result.get("watching")
    assert result["watchLines"], "the plugin did not say it is in watch mode"
    assert "another engine (legacy)" in result["watchLines"][0], result["watchLines"]
    assert len(result["turns"]) == TURNS
    for turn in result["turns"]:
        assert turn["rc"] == 0 and turn["status"] == "ok", turn
    if not with_store(report):
        return
    late = [t for t in result["turns"] if t["storedSeconds"] is None]
    assert late == [], f"not stored within {TURN_WAIT} s: {late}"  # the bound, each turn
    assert all(result["found"]), result["found"]
    assert result["watchConverged"], result["auditWatch"]
    assert_every_host_message_stored_once(result["auditWatch"])


def test_with_lossless_selected_again_nothing_is_duplicated(report: Report) -> None:
    result = scenario(report, "watchMode")
    assert result["engineLines"], "the plugin did not say it is the engine again"
    for turn in result["engineTurns"]:
        assert turn["rc"] == 0 and turn["status"] == "ok", turn
    if not with_store(report):
        return
    assert all(result["engineStored"]), result["engineStored"]
    assert result["converged"], result["audit"]
    assert_every_host_message_stored_once(result["audit"])
