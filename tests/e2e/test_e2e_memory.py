"""End to end against the real OpenClaw gateway: a fact the agent wrote only into its workspace's daily note is
recalled in a new session with its ``file:`` citation, and after the note is edited the old text never reaches
the model again. The same run as ``test_e2e_openclaw.py`` (the ``report`` fixture), its last healthy scenario.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.checks import Report, assert_completed, scenario, with_store
from tests.e2e.scenarios_memory import NEW_PROBE, NOTE, OLD_PROBE

pytestmark = pytest.mark.e2e


def requests_after(report: Report, mark: int) -> list[str]:
    """Every request the fake model received after the first ``mark``, to the end of the run, as logged."""
    lines = (Path(report["workdir"]) / "model-requests.jsonl").read_text().splitlines()
    return lines[mark:]


def test_a_fact_written_only_into_the_workspace_note_is_recalled_in_a_new_session(report: Report) -> None:
    result = scenario(report, "memoryFile")
    # The workspace the host itself names (config and defaults): under this run's OpenClaw home.
    assert Path(result["workspace"]).is_relative_to(result["home"]), result["workspace"]
    if not with_store(report):
        pytest.skip("the stub sidecar does not index memory files")
    assert result["written"]["indexed"], result["listing"]
    before = result["before"]
    assert_completed(before)
    assert before["sessionKey"] == result["newKey"] and result["newKey"].startswith("agent:main:dashboard:")
    assert len(before["historyTexts"]) <= 2, "the new session's history is not empty"
    block = before["recalledBlock"]
    assert OLD_PROBE in block, block
    # Quoted with its citation: the note's path and the lines the fact stands on (line 7 of the note).
    assert f"[file:{NOTE}#L" in block, block
    line = next(ln for ln in block.splitlines() if OLD_PROBE in ln)
    assert f"[file:{NOTE}#L7" in line, line
    # Nothing else carried it to the model: the host does not inject a daily note, nor did anyone say it.
    assert not any(OLD_PROBE in text for text in before["historyTexts"])


def test_after_the_note_is_edited_the_old_text_never_reaches_the_model_again(report: Report) -> None:
    result = scenario(report, "memoryFile")
    if not with_store(report):
        pytest.skip("the stub sidecar does not index memory files")
    assert result["edited"]["indexed"], result["listing"]
    after = result["after"]
    assert_completed(after)
    assert NEW_PROBE in after["recalledBlock"] and f"[file:{NOTE}#L" in after["recalledBlock"], after["recalledBlock"]
    assert OLD_PROBE not in after["recalledBlock"], after["recalledBlock"]
    # Never again, in anything the model received from the edit to the end of the run (restarts, outages and
    # watch mode included), nor anywhere in the sidecar's messages.
    later = requests_after(report, result["requestsAtEdit"])
    assert later and any(NEW_PROBE in line for line in later)
    leaks = [line[max(0, line.find(OLD_PROBE) - 300) :][:600] for line in later if OLD_PROBE in line]
    assert leaks == [], leaks
    assert result["oldRows"] == [], result["oldRows"]
    assert result["newRows"] and {row["kind"] for row in result["newRows"]} == {"memory"}, result["newRows"]
