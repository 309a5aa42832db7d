"""Subagents over real HTTP: a spawn registers the child, its parent recalls the child's outcome (never its
transcript), the child recalls its own session and its parent's history, and a rollback undoes the spawn."""

from __future__ import annotations

from typing import Any

import numpy as np

from openclaw_lossless.recall.assemble import LANE_DEPTH
from openclaw_lossless.store.model.sessions import Scope
from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import LiveSidecar

PARENT = "agent:main:main"
CHILD = "agent:main:subagent:42"
T0 = 1_700_000_000_000
CHILD_QUESTION = "Find which region hosts the audit bucket."
ANSWER = "The audit bucket lives in eu-north-1."
NOTABLE = "Remember that the audit bucket key rotates every Friday, we decided to keep it that way."


def _child_turn(messages: list[dict[str, Any]], key: str = "child-1") -> dict[str, Any]:
    return {"advancementKey": key, "sessionId": "s-child", "sessionKey": CHILD, "messages": messages}


def _tool_call(n: int) -> dict[str, Any]:
    call = {"type": "toolCall", "id": f"c{n}", "name": "list_buckets", "arguments": {"filter": "audit"}}
    return {"role": "assistant", "content": [call], "timestamp": T0 + n * 1000}


def _run_child(sidecar: LiveSidecar) -> dict[str, Any]:
    """Parent history, a spawned child that finds the answer, notes something must-remember, then ends on a
    tool call; the child ends. Returns the subagent-ended answer."""
    for turn in conversation(6, session="s-parent"):
        sidecar.post("commit-turn", commit_body(turn, session="s-parent"))
    sidecar.post("subagent-spawn", {"parentSessionKey": PARENT, "childSessionKey": CHILD})
    first = [
        {"role": "user", "content": CHILD_QUESTION, "timestamp": T0},
        _tool_call(1),
        {"role": "toolResult", "toolName": "list_buckets", "content": "audit-logs eu-north-1", "timestamp": T0 + 2000},
        {"role": "assistant", "content": [{"type": "text", "text": ANSWER}], "timestamp": T0 + 3000},
    ]
    assert sidecar.post("commit-turn", _child_turn(first)).json()["stored"] == 4
    second = [{"role": "user", "content": NOTABLE, "timestamp": T0 + 4000}, _tool_call(5)]
    assert sidecar.post("commit-turn", _child_turn(second, "child-2")).json()["stored"] == 2
    ended: dict[str, Any] = sidecar.post("subagent-ended", {"childSessionKey": CHILD, "reason": "completed"}).json()
    sidecar.wait_for_backlog()
    return ended


def _messages(sidecar: LiveSidecar, session_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = sidecar.client.get(
        f"/v1/sessions/{session_id}/messages", params={"last": 100}
    ).json()["messages"]
    return found


def test_the_parent_recalls_the_childs_outcome_never_its_transcript(sidecar: LiveSidecar) -> None:
    assert _run_child(sidecar) == {"ended": True, "outcomesCopied": 2}
    child_ids = {m["id"] for m in _messages(sidecar, "s-child")}
    for scope in ("agent", "session"):
        body = {
            "sessionId": "s-parent",
            "sessionKey": PARENT,
            "messages": [],
            "prompt": "Which region hosts the audit bucket, and when does its key rotate?",
            "trace": True,
            "config": {"recallScope": scope},
        }
        result = sidecar.post("assemble", body).json()
        block = result["systemPromptAddition"]
        assert block.count(ANSWER) == 1 and f"[subagent result] {ANSWER}" in block, scope
        assert f"[subagent result] {NOTABLE}" in block, scope
        assert CHILD_QUESTION not in block and "list_buckets" not in block, scope
        considered = {int(c["citation"].removeprefix("msg:")) for c in result["trace"]["candidates"]}
        assert considered and not considered & child_ids, f"{scope}: a lane reached the child's transcript"


def test_outcome_records_are_the_final_text_answer_and_the_must_remember_message_citing_the_child(
    sidecar: LiveSidecar,
) -> None:
    """The child ended on a tool call: its final answer is still the last message with text of its own."""
    _run_child(sidecar)
    child = {m["text"]: m["citation"] for m in _messages(sidecar, "s-child")}
    outcomes = [m for m in _messages(sidecar, "s-parent") if m["kind"] == "outcome"]
    assert [(m["text"], m["cites"]) for m in outcomes] == [
        (f"[subagent result] {ANSWER}", child[ANSWER]),
        (f"[subagent result] {NOTABLE}", child[NOTABLE]),
    ]
    assert all(m["original"]["childSessionKey"] == CHILD for m in outcomes)


def test_the_child_recalls_its_own_session_and_its_parents_history_but_not_a_siblings(sidecar: LiveSidecar) -> None:
    _run_child(sidecar)
    sibling = "agent:main:subagent:43"
    sidecar.post("subagent-spawn", {"parentSessionKey": PARENT, "childSessionKey": sibling})
    noisy = {"role": "user", "content": "The staging database password rotation is my job now.", "timestamp": T0}
    body = {"advancementKey": "sib-1", "sessionId": "s-sibling", "sessionKey": sibling, "messages": [noisy]}
    sidecar.post("commit-turn", body)
    sidecar.wait_for_backlog()
    for scope in ("agent", "session"):
        view = {
            "sessionId": "s-child",
            "sessionKey": CHILD,
            "messages": [],
            "prompt": f"{QUESTION} Also, which region hosts the audit bucket?",
            "config": {"recallScope": scope},
        }
        block = sidecar.post("assemble", view).json()["systemPromptAddition"]
        assert "rotates every Tuesday" in block, scope  # the parent's history (FACT)
        assert ANSWER in block, scope  # its own session
        assert "my job now" not in block, scope  # a sibling's transcript is not its history


def test_spawn_registers_the_child_session_which_its_first_turn_adopts_and_rollback_undoes_both(
    sidecar: LiveSidecar,
) -> None:
    def counts() -> tuple[int, int]:
        stats = sidecar.client.get("/stats").json()
        return stats["sessions"], stats["subagents"]

    sidecar.post("commit-turn", commit_body(conversation(1)[0], session="s-parent"))
    assert counts() == (1, 0)
    spawn = sidecar.post("subagent-spawn", {"parentSessionKey": PARENT, "childSessionKey": CHILD}).json()
    assert counts() == (2, 1)
    sidecar.post("commit-turn", _child_turn([{"role": "user", "content": CHILD_QUESTION, "timestamp": T0}]))
    assert counts() == (2, 1)  # the host's session id named the registered session: no second one
    assert [m["text"] for m in _messages(sidecar, "s-child")] == [CHILD_QUESTION]

    other = "agent:main:subagent:43"
    spawned = sidecar.post("subagent-spawn", {"parentSessionKey": PARENT, "childSessionKey": other}).json()
    assert counts() == (3, 2)
    assert sidecar.post("subagent-spawn/rollback", {"spawnId": spawned["spawnId"]}).json() == {"rolledBack": True}
    assert counts() == (2, 1)
    sidecar.post("subagent-spawn", {"parentSessionKey": PARENT, "childSessionKey": other})
    assert sidecar.post("subagent-spawn/rollback", {"childSessionKey": other}).json() == {"rolledBack": True}
    assert counts() == (2, 1)
    # A child that already holds messages keeps them: rollback takes its link, never its transcript.
    assert sidecar.post("subagent-spawn/rollback", {"spawnId": spawn["spawnId"]}).json() == {"rolledBack": True}
    assert counts() == (2, 0)
    assert [m["text"] for m in _messages(sidecar, "s-child")] == [CHILD_QUESTION]


def _keyword_scope(backend: str, scope: Scope) -> tuple[str, list[object]]:
    """The WHERE clause the keyword lane of this backend restricts its SQL with."""
    if backend == "postgresql":
        from openclaw_lossless.store.postgres.fulltext import scope_sql

        return scope_sql(scope, "m")
    from openclaw_lossless.store.sqlite.sessions import scope_sql as sqlite_scope_sql

    return sqlite_scope_sql(scope, "m")


def test_every_lane_applies_the_same_scope(sidecar: LiveSidecar) -> None:
    """Keyword SQL, the vector mask and the neighbour check must agree on which messages a scope holds."""
    _run_child(sidecar)
    core = sidecar.sidecar
    conn = core.db.reader()
    find_session, recall_scope = core.ops.sessions.find_session, core.ops.sessions.recall_scope
    rows = conn.execute("SELECT id, agent_id, session_rowid FROM messages").fetchall()
    index = core.index
    assert index is not None
    for session_id in ("s-parent", "s-child"):
        session = find_session(conn, session_id)
        assert session is not None
        for mode in ("agent", "session"):
            scope = recall_scope(conn, session, mode)
            by_contains = {r[0] for r in rows if scope.contains(r[1], r[2])}
            where, params = _keyword_scope(core.ops.name, scope)
            by_sql = {r[0] for r in conn.execute(f"SELECT m.id FROM messages m WHERE {where}", params)}
            probe = np.ones(index.dimension, dtype=np.float32) / np.sqrt(index.dimension)
            by_vector = {i for i, _ in index.search(probe, scope, max(LANE_DEPTH, len(rows)))}
            assert by_contains == by_sql == by_vector, (session_id, mode)
    parent, child = find_session(conn, "s-parent"), find_session(conn, "s-child")
    assert parent is not None and child is not None
    assert not recall_scope(conn, parent, "agent").contains("main", child.rowid)
    assert recall_scope(conn, child, "agent").contains("main", parent.rowid)
