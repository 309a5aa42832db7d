"""Watch mode: another engine (``legacy``) selected, ``openclaw-lossless serve --watch`` run by hand.

Ten turns through the gateway; after each, how long until the turn's user message is in the store (read from
the store, waited for ``TURN_WAIT`` at most). Then every fact is searched for, the exactly-once audit is run
against the host's transcripts, and lossless is selected again (the same ``serve --watch`` stays up): two more
turns committed by the engine, and the audit again finds nothing missing and nothing stored twice.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from tests.e2e import transcripts
from tests.e2e.gateway import JsonObj, Run
from tests.e2e.loopback import wait_until

WATCH_KEY = "agent:main:watch-e2e"
TURNS = 10
TURN_WAIT = 5.0  # the bound: each turn stored within 5 s
CONVERGE_WAIT = 60.0
WATCH_LINE = "lossless: watch mode"
ENGINE_LINE = "lossless: engine mode"


def set_slot(run: Run, engine: str) -> None:
    """The slot set to ``engine``; the plugin stays installed and enabled, autoStart off (the user's serve)."""
    run.select_engine(autoStart=False)
    config: JsonObj = json.loads(run.config_path.read_text())
    config["plugins"]["slots"]["contextEngine"] = engine
    run.config_path.write_text(json.dumps(config, indent=2))


def start_gateway(run: Run, engine: str) -> None:
    with run.timed(f"watch:gateway:{engine}"):
        run.start_gateway()


def stored_within(run: Run, session_id: str | None, count: int, timeout: float) -> float | None:
    """Seconds from now until the store holds ``count`` messages of the session (None: not within ``timeout``).

    Counted when the turn has returned, its reply recorded: the whole turn, not just its user message."""
    began = time.monotonic()
    found = session_id is not None and wait_until(
        lambda: len(run.stored_texts_or_none(session_id)) >= count, timeout=timeout, interval=0.1
    )
    return round(time.monotonic() - began, 2) if found else None


def scenario_watch_mode(run: Run) -> JsonObj:
    run.stop_gateway()  # first: a gateway with autoStart would start its own sidecar again
    set_slot(run, "legacy")
    run.kill_sidecar()  # whichever answers: from here on the user's serve --watch is the only one
    serve = run.serve_by_hand("--watch")
    up = wait_until(lambda: run.sidecar_pid() != 0, timeout=90)
    mark = len(run.gateway_log_text())
    start_gateway(run, "legacy")
    watch_lines = run.log_lines_since(mark, WATCH_LINE)
    label = uuid.uuid4().hex[:6]
    turns: list[JsonObj] = []
    for n in range(TURNS):
        fact = f"Watch fact {label}-{n}: the buoy {n} light is {['red', 'green', 'white'][n % 3]}."
        turn = run.turn(fact, session_key=WATCH_KEY)
        stored = stored_within(run, turn.session_id, 2 * (n + 1), TURN_WAIT)  # its user message and reply
        turns.append({"rc": turn.rc, "status": turn.status, "sessionId": turn.session_id, "storedSeconds": stored})
    searches = [_search(run, f"Watch fact {label}-{n} buoy") for n in range(TURNS)]
    found = [any(f"{label}-{n}:" in hit.get("text", "") for hit in hits) for n, hits in enumerate(searches)]
    with run.timed("watch:converge"):
        watched = wait_until(lambda: transcripts.converged(run.audit()), timeout=CONVERGE_WAIT, interval=2)
    audit_watch = run.audit()
    mark = len(run.gateway_log_text())
    run.stop_gateway()
    set_slot(run, "lossless")
    start_gateway(run, "lossless")
    engine_lines = run.log_lines_since(mark, ENGINE_LINE)
    back = [run.turn(f"Engine again {label}-{n}: the tide turns at {n + 4}.", session_key=WATCH_KEY) for n in range(2)]
    back_stored = [bool(run.rows_holding(f"Engine again {label}-{n}:")) for n in range(2)]
    with run.timed("watch:convergeEngine"):
        converged = wait_until(lambda: transcripts.converged(run.audit()), timeout=CONVERGE_WAIT, interval=2)
    return {
        "servePid": serve.pid,
        "watching": run.sidecar("/healthz").get("catchUp", {}).get("watching"),
        "serveUp": up,
        "watchLines": watch_lines,
        "engineLines": engine_lines,
        "turns": turns,
        "found": found,
        "watchConverged": watched,
        "auditWatch": audit_watch,
        "engineTurns": [{"rc": t.rc, "status": t.status, "sessionId": t.session_id} for t in back],
        "engineStored": back_stored,
        "converged": converged,
        "audit": run.audit(),
        "catchUp": run.sidecar("/stats").get("catchUp"),
    }


def _search(run: Run, query: str) -> list[Any]:
    from urllib.parse import urlencode

    hits: list[Any] = run.sidecar("/v1/search?" + urlencode({"q": query, "mode": "keyword", "k": 20})).get("hits", [])
    return hits
