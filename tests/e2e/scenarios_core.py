"""The scenarios of a healthy run: engine selected, recall across compaction and ``/new``, tools, subagents, import.

Each takes the ``Run`` and returns its evidence; an exception is recorded as the scenario's error.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e import fake_model
from tests.e2e.gateway import (
    ASSEMBLE_FALLBACK_LINE,
    FACT,
    FACT_PROBE,
    MAIN_KEY,
    SIDE_KEY,
    SIDECAR_READY_LINE,
    JsonObj,
    Run,
)
from tests.e2e.loopback import free_port, http_json, wait_until


def scenario_selected(run: Run) -> JsonObj:
    """Turns reach the engine (no legacy degradation), every turn is committed, the sidecar embeds locally,
    and the engine shapes what the model gets: a second chat of the same agent finds the first chat's fact
    in its system prompt, in the Recalled Context block only the engine writes."""
    messages = [f"Remember this: {FACT}.", "Filler one: tomatoes like sun.", "Filler two: boats like wind."]
    turns = [run.turn(m) for m in messages]
    session_id = turns[-1].session_id
    stored = run.stored_texts(session_id) if session_id else []
    side = run.turn("Another chat. Which day does the staging database password rotate?", session_key=SIDE_KEY)
    stats = run.sidecar("/stats")
    log = run.gateway_log_text().splitlines()
    return {
        "turns": [t.view() for t in turns],
        "sessionId": session_id,
        "storedTexts": stored,
        "expectedStored": 2 * len(messages),
        "sideTurn": side.view(),
        "sideStoredTexts": run.stored_texts(side.session_id) if side.session_id else [],
        "stats": {k: stats.get(k) for k in ("messages", "sessions", "turns")},
        "hookCounts": {op: v.get("count") for op, v in (stats.get("latency") or {}).items()},
        "health": http_json("GET", f"{run.sidecar_url}/healthz")[1],
        "assembleFallbackLines": [ln for ln in log if ASSEMBLE_FALLBACK_LINE in ln][:5],
        "readyLines": [ln for ln in log if SIDECAR_READY_LINE in ln][:5],
        "storeSessions": run.session_rows(),
    }


def scenario_compaction(run: Run) -> JsonObj:
    """After host compaction the fact is gone from the host's history but recalled by the engine."""
    turns = [run.turn(f"Filler {word}: nothing to remember here.") for word in ("three", "four")]
    with run.timed("compact"):
        done = run.openclaw("sessions", "compact", MAIN_KEY, "--json", timeout=180)
    compact: Any = None
    with contextlib.suppress(json.JSONDecodeError):
        compact = json.loads(done.stdout)
    compaction_requests = [r for r in run.new_requests() if r["reply"]["kind"] == "compaction"]
    question = run.turn("Quick question: when does the staging database password rotate?")
    stats = run.sidecar("/stats")
    return {
        "fillers": [t.view() for t in turns],
        "compact": {"rc": done.returncode, "result": compact, "stderrTail": done.stderr[-800:]},
        "compactionPrompts": [r["messages"][-1]["text"][-1500:] for r in compaction_requests],
        "compactionReplies": [r["reply"]["text"] for r in compaction_requests],
        "question": question.view(),
        "storeCompactions": stats.get("compactions"),
        "storeCompactionRows": run.store(
            'SELECT s.session_id AS "sessionId", s.session_key AS "sessionKey", c.tokens_before AS "tokensBefore",'
            ' c.tokens_after AS "tokensAfter", c.compacted, c.summary, c.reason'
            " FROM compactions c JOIN sessions s ON s.id = c.session_rowid ORDER BY c.id"
        ),
    }


def scenario_new_session(run: Run) -> JsonObj:
    """`/new` both ways a user types it in OpenClaw 2026.9.6, and recall of the old session's fact after each.

    Typed into a chat (here through `openclaw agent`, the gateway's `agent` method, as in every channel), `/new`
    resets `agent:main:main` IN PLACE: the gateway's performGatewaySessionReset keeps the entry's sessionId
    (`nextSessionId = currentEntry?.sessionId ?? randomUUID()` in dist/session-reset-service-*.mjs; the
    auto-reply path likewise keeps `entry?.sessionId`, dist/get-reply-*.mjs), so the store sees the same session.
    Typed into the Control UI, `/new` creates a fresh dashboard session (docs/web/control-ui/chat.md): the UI sends
    `sessions.create {agentId, parentSessionKey, emitCommandHooks: true, succeedsParent: false}`, which makes a
    new key `agent:main:dashboard:<uuid>` with a new sessionId (unless `session.dmScope: "main"` is set
    explicitly, which resets the main session in place instead). That is the session switch recall must bridge.
    """
    before = run.turns[-1].session_id
    typed = run.turn("/new")
    in_place = run.turn("Fresh start. Remind me: which day does the staging database password rotate?")
    created = run.gateway_call(
        "sessions.create",
        {"agentId": "main", "parentSessionKey": MAIN_KEY, "emitCommandHooks": True, "succeedsParent": False},
    )
    new_key = str(created.get("key") or "")
    question = run.turn("New chat. Which day does the staging database password rotate?", session_key=new_key)
    return {
        "sessionIdBefore": before,
        "typedNew": typed.view(),
        "inPlaceQuestion": in_place.view(),
        "created": created,
        "newKey": new_key,
        "question": question.view(),
        "factRows": run.rows_holding(FACT_PROBE),
        "questionRows": run.rows_holding(question.message),
        "inPlaceRows": run.rows_holding(in_place.message),
        "newSessionStoredTexts": run.stored_texts(question.session_id) if question.session_id else [],
        "storeSessions": run.session_rows(),
    }


def scenario_typed_new(run: Run) -> JsonObj:
    """`/new` typed into the chat (through `openclaw agent`, as every channel sends it), then a question only
    recall can answer: the lean form of ``scenario_new_session`` for the other OpenClaw lines, where the reset
    keeps the session (2026.8+) or starts a new one (2026.7)."""
    before = run.turns[-1].session_id
    typed = run.turn("/new")
    question = run.turn("Fresh start. Remind me: which day does the staging database password rotate?")
    return {
        "sessionIdBefore": before,
        "typedNew": typed.view(),
        "question": question.view(),
        "factRows": run.rows_holding(FACT_PROBE),
    }


def scenario_agent_tools(run: Run) -> JsonObj:
    """The model is offered the plugin's tools by the real host, calls lossless_search, and reads its result."""
    turn = run.turn(f"Please {fake_model.SEARCH_TRIGGER}: what did we say about the staging database password?")
    results = [
        m["text"] for r in turn.requests for m in r["messages"] if m.get("role") == "tool" and m.get("tool_call_id")
    ]
    return {
        "turn": turn.view(),
        "toolsOffered": sorted({name for r in turn.requests for name in r["tools"] if name.startswith("lossless_")}),
        "replyKinds": [r["reply"]["kind"] for r in turn.requests],
        "toolResults": results,
    }


def subagents_settled(run: Run) -> bool:
    rows = run.gateway_call("sessions.list", {}).get("sessions", [])
    children = [r for r in rows if ":subagent:" in str(r.get("key"))]
    return bool(children) and not any(r.get("hasActiveRun") for r in rows)


def outcome_rows(run: Run) -> list[JsonObj] | None:
    """The outcome records onSubagentEnded copied into a parent, with the child message each one cites."""
    return run.store(
        'SELECT o.id, o.text, o.original, o.cites, ps.session_id AS "sessionId", ps.session_key AS "sessionKey",'
        ' c.role AS "citedRole", c.text AS "citedText", cs.session_key AS "citedSessionKey"'
        " FROM messages o JOIN sessions ps ON ps.id = o.session_rowid"
        " LEFT JOIN messages c ON c.id = o.cites LEFT JOIN sessions cs ON cs.id = c.session_rowid"
        " WHERE o.kind = 'outcome' ORDER BY o.id"
    )


def scenario_subagents(run: Run) -> JsonObj:
    """A spawned child is linked to its parent and its outcome is recallable from the parent later."""
    spawn = run.turn(f"Please {fake_model.SPAWN_TRIGGER}: the lantern count in the east shed.")
    with run.timed("subagentSettle"):
        settled = wait_until(lambda: subagents_settled(run), timeout=120, interval=2)
        time.sleep(3)  # the parent's follow-up runs (child announcements) commit right after
    rows = run.gateway_call("sessions.list", {}).get("sessions", [])
    children = [
        {
            "key": r.get("key"),
            "sessionId": r.get("sessionId"),
            "parentSessionKey": r.get("parentSessionKey"),
            "spawnedBy": r.get("spawnedBy"),
            "status": r.get("status"),
        }
        for r in rows
        if ":subagent:" in str(r.get("key"))
    ]
    child_requests = [r for r in run.new_requests() if r["reply"]["kind"] == "child"]
    child_stored = {c["key"]: run.stored_texts(c["sessionId"]) for c in children if c.get("sessionId")}
    parent_id = spawn.session_id or ""
    # onSubagentEnded (which hands the child's outcome to the parent) may land a moment after the runs settle.
    with run.timed("outcomeInParent"):
        wait_until(lambda: bool(outcome_rows(run) or run.sidecar_mode == "stub"), timeout=30, interval=1)
    links = run.store(
        'SELECT parent_session_key AS "parentKey", child_session_key AS "childKey", context_mode AS "contextMode",'
        ' ended_at AS "endedAt", ended_reason AS "endedReason" FROM subagent_links ORDER BY id'
    )
    outcomes = outcome_rows(run)
    run.turn("/new")  # typed, as a user starts over: the parent's history no longer holds the child's report
    question = run.turn("New topic. How many brass lanterns are in the lighthouse east shed?")
    stats = run.sidecar("/stats")
    parent_stored = run.stored_texts(question.session_id) if question.session_id else []
    return {
        "spawnTurn": spawn.view(),
        "spawnReplyKinds": [r["reply"]["kind"] for r in spawn.requests],
        "settled": settled,
        "children": children,
        "childRunRequests": len(child_requests),
        "childStoredTexts": child_stored,
        "parentSessionId": parent_id,
        "question": question.view(),
        "parentStoredTexts": parent_stored[-20:],
        "storeSubagents": stats.get("subagents"),
        "storeLinks": links,
        "storeOutcomes": outcomes,
    }


def transcript_events(databases: list[Path]) -> int:
    """How many transcript events the gateway's own stores hold now (read-only; 0 for one not readable)."""
    total = 0
    for path in databases:
        uri = f"file:{path}?mode=ro"
        with contextlib.suppress(sqlite3.Error), contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            total += int(conn.execute("SELECT count(*) FROM transcript_events").fetchone()[0])
    return total


def settled_events(databases: list[Path], timeout: float = 10) -> int:
    """The event count once it stops moving for a second (or after ``timeout``): the gateway gone quiet."""
    last = transcript_events(databases)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(1)
        now = transcript_events(databases)
        if now == last:
            break
        last = now
    return last


def scenario_import_real(run: Run) -> JsonObj:
    """The operator's import reads the real gateway's own transcript store (while it runs) into a fresh store."""
    target = run.workdir / "imported-state"
    common = ["--state-dir", str(target), "--port", str(free_port()), "--json"]
    cli = str(run.venv_bin / "openclaw-lossless")

    # A fresh store is a new state dir on SQLite; on PostgreSQL the schema names the store, so it needs its own.
    env = run.env | (
        {"LOSSLESS_DATABASE_SCHEMA": f"{run.store_reader.schema}_imported"} if run.store_reader.url else {}
    )

    def lossless(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([cli, *args, *common], env=env, capture_output=True, text=True, timeout=300)

    state = str(run.home / ".openclaw")
    databases = sorted(run.home.rglob("openclaw-agent.sqlite"))
    # The gateway may still be writing the last turn's events: give it a moment to go quiet, and count the
    # events written while the imports ran, which the second import may rightly bring in.
    before = settled_events(databases)
    first = lossless("import", "--openclaw-state", state)
    again = lossless("import", "--openclaw-state", state)
    written_meanwhile = transcript_events(databases) - before
    found = lossless("search", "staging database password rotate", "--mode", "keyword", "-k", "3")

    def parsed(done: subprocess.CompletedProcess[str]) -> Any:
        if done.returncode != 0:
            return {"rc": done.returncode, "stderr": done.stderr[-800:]}
        return json.loads(done.stdout)

    return {
        "agentDatabases": [str(p.relative_to(run.home)) for p in databases],
        "eventsWrittenDuringImports": written_meanwhile,
        "first": parsed(first),
        "again": parsed(again),
        "search": parsed(found),
        "liveMessages": run.sidecar("/stats").get("messages"),
    }
