"""End to end against the real OpenClaw gateway: outages, a foreign program on the port, ``doctor``, ``/lossless``.

The same run as ``test_e2e_openclaw.py`` (the ``report`` fixture of ``conftest.py``). The outages are judged
against the host's own transcripts: every message the host recorded, in every session (a subagent's too), must
be in the sidecar's store exactly once after the sidecar answers again, however it came back.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.checks import Report, assert_completed, assert_silent_outage_trimmed_and_spooled, scenario, with_store
from tests.e2e.gateway import FACT_PROBE, OUTCOME_PROBE

pytestmark = pytest.mark.e2e

HOOK_PREFIX = "/v1/hooks/"


def assert_every_host_message_stored_once(audit: Report) -> None:
    assert audit["hostMessages"] > 0 and audit["hostRowsUnread"] == 0, audit
    missing, duplicated = audit["missing"], audit["duplicated"]
    assert missing == [], f"{len(missing)} host transcript messages are not in the store: {missing[:10]}"
    assert duplicated == [], f"stored more than once: {duplicated[:10]}"
    # Nothing stored under another identity either (a second copy whose time or text differs from the host's).
    assert audit["storeOnly"] == [], audit["storeOnly"][:10]
    # Nor what the store leaves out: the /lossless exchanges (a search answer quotes stored history).
    assert audit["transcriptOnlyStored"] == [], audit["transcriptOnlyStored"][:10]


def assert_outage_caught_up(report: Report, result: Report) -> None:
    """The outage's turns completed, with a tool call and a subagent, and the store converged to the host."""
    assert result["killedPid"] > 0, "no sidecar answered before the outage"
    # The kill hit the conversation: the host's commit of the turn in flight found no sidecar.
    assert result["queuedLines"] or result["unreachableLines"], result["losslessLines"]
    for turn in result["turns"]:
        assert turn["rc"] == 0 and turn["status"] == "ok" and turn["foundRequest"], turn
    kinds = [kind for turn in result["turns"] for kind in turn["replyKinds"]]
    assert "status" in kinds and "spawn" in kinds, kinds
    assert result["subagentsSettled"]
    assert result["sidecarBack"] and result["newPid"] not in (0, result["killedPid"]), result["losslessLines"]
    if not with_store(report):
        return
    audit = result["audit"]
    children = [key for key in audit["hostSessions"].values() if key and ":subagent:" in key]
    assert len(children) >= 2, audit["hostSessions"]  # the subagents scenario's child and this outage's
    assert_every_host_message_stored_once(audit)
    assert result["converged"], result["audit"]


def test_outage_brought_back_by_the_plugin(report: Report) -> None:
    result = scenario(report, "outageByPlugin")
    assert len(result["pluginStartLines"]) == 1, result["losslessLines"]  # the plugin started it again, once
    assert_outage_caught_up(report, result)


def test_outage_overflow_every_silent_turn_is_trimmed_and_stored_once(report: Report) -> None:
    assert_silent_outage_trimmed_and_spooled(report, scenario(report, "outageOverflow"))


def test_foreign_server_on_the_port_gets_nothing(report: Report) -> None:
    result = scenario(report, "foreignPort")
    for turn in result["turns"]:
        assert_completed(turn)
    requests: list[dict[str, Any]] = result["foreignRequests"]
    assert not [r for r in requests if r["authorization"]], f"the token reached a foreign program: {requests}"
    sent = [r for r in requests if r["method"] != "GET" or r["bodyBytes"] or r["path"].startswith(HOOK_PREFIX)]
    assert sent == [], f"a hook request reached the foreign program: {sent}"
    port = str(result["foreignPort"])
    held = [line for line in result["heldLines"] if f"port {port}" in line and "sidecarUrl" in line]
    assert held, result["losslessLines"]
    assert f"pid {result['foreignPid']}" in held[0], held[0]  # the program that holds it, named


def test_outage_brought_back_by_hand(report: Report) -> None:
    result = scenario(report, "outageByHand")
    # The turns of the foreign-server phase ran with no sidecar at all: the user's first `serve` catches them up.
    assert result["firstUp"]
    assert result["pluginStartLines"] == [], "autoStart is off: the plugin must leave the user's sidecar alone"
    if with_store(report):
        assert_every_host_message_stored_once(result["firstAudit"])
        assert result["firstConverged"]
    assert_outage_caught_up(report, result)


def findings(run: Report) -> list[dict[str, Any]]:
    data = run["result"]
    assert isinstance(data, dict) and isinstance(data.get("findings"), list), run
    found: list[dict[str, Any]] = data["findings"]
    return found


def failing(run: Report, code: str) -> dict[str, Any]:
    """The one failing finding with ``code``; it must carry a fix."""
    bad = [f for f in findings(run) if not f["ok"] and f.get("code") == code]
    assert len(bad) == 1, f"expected a failing {code!r} finding, got {findings(run)}"
    assert bad[0]["fix"], bad[0]
    assert run["rc"] == 1, run
    return bad[0]


CHAIN_OK = {"slot_ok", "entry_ok", "plugin_installed", "version_ok", "config_valid", "sidecar_verified"}
MISSING_TURNS = "turns_missing"


def test_doctor_reports_each_misconfiguration_of_the_real_state(report: Report) -> None:
    result = scenario(report, "doctor")
    healthy = findings(result["healthy"])
    codes = {f.get("code") for f in healthy if f["ok"]}
    assert codes >= CHAIN_OK, healthy
    assert not [f for f in healthy if not f["ok"]], (
        f"every host message stored before doctor ran: {result['atRest']}",
        healthy,
    )
    assert "lossless" in failing(result["slotLegacy"], "slot_not_lossless")["fix"]
    assert "plugins enable lossless" in failing(result["entryDisabled"], "entry_disabled")["fix"]
    assert "http://" in failing(result["urlNoScheme"], "sidecar_url_invalid")["fix"]
    wrong = failing(result["urlWrongPort"], "sidecar_not_running")
    assert str(result["wrongPort"]) in wrong["detail"], wrong


def test_outage_with_no_sidecar_for_a_while(report: Report) -> None:
    result = scenario(report, "outageLong")
    assert result["pluginStartLines"] == [], result["losslessLines"]
    assert_outage_caught_up(report, result)
    if with_store(report):
        # While it was down, doctor saw the host's turns the store lacks, and said how to get them back.
        down = failing(result["whileDown"], MISSING_TURNS)
        assert down["data"]["missing"] > 0 and "main" in down["data"]["agents"], down
        assert "import --agent main" in down["fix"], down
        after = [f for f in findings(result["doctorAfter"]) if f.get("code") == MISSING_TURNS and not f["ok"]]
        assert after == [], after


def command_reply(answer: Report) -> str:
    """The assistant message right after the command in the session's history ('' when there is none)."""
    last = answer["last"]
    typed = [i for i, m in enumerate(last) if m["role"] == "user" and m["text"] == answer["message"]]
    after = last[typed[-1] + 1 :] if typed else []
    return str(after[0]["text"]) if after and after[0]["role"] == "assistant" else ""


def test_lossless_chat_command_answers_without_the_model(report: Report) -> None:
    result = scenario(report, "chatCommand")
    status, why, search = result["answers"]
    for answer in (status, why, search):
        assert "error" not in answer, answer
        assert answer["modelRequests"] == [], f"{answer['message']!r} went to the model: {answer['modelRequests']}"
        assert command_reply(answer), f"{answer['message']!r} got no answer: {answer['last']}"
    assert command_reply(status).startswith("Lossless memory: ON"), command_reply(status)
    # The last turn before the commands recalled the subagent's outcome; /lossless why shows it, with its trace.
    assert OUTCOME_PROBE in command_reply(why) and "Kept" in command_reply(why), command_reply(why)
    assert FACT_PROBE in command_reply(search) and "[msg:" in command_reply(search), command_reply(search)
