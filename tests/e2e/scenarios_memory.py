"""Workspace memory files in the real gateway: a fact the agent wrote down only in its daily note is recalled.

The host says where the agent's workspace is (``agents.files.list``: its config and defaults, as the agent
itself resolves it); a note is written there as the agent's memory flush writes one, ``memory/<date>.md``. The
host never puts a daily note into the prompt by itself (only ``MEMORY.md`` is injected), so the fact can reach
the model only through the engine's Recalled Context. The sidecar's own pass (every
``MEMORY_FILES_INTERVAL_S`` in this run) indexes the note; a new session (the Control UI's ``/new``) asks about
it; then the note is edited, the fact changed, and the same question is asked again.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.e2e.gateway import MAIN_KEY, JsonObj, Run
from tests.e2e.loopback import wait_until

NOTE = "memory/2026-11-30.md"
OLD_FACT = "The spare key to the boathouse is taped under the third step of the porch."
NEW_FACT = "The spare key to the boathouse now hangs on the hook inside the garden shed."
OLD_PROBE = "third step of the porch"
NEW_PROBE = "hook inside the garden shed"
INDEX_WAIT = 30.0


def note_text(fact: str) -> str:
    return f"# 2026-11-30\n\n## Household\n\nNoted while tidying up today.\n\n- {fact}\n"


def indexed(run: Run, size: int) -> bool:
    """Whether the sidecar's last pass indexed the note as it is now (its size; its chunks stored)."""
    files = run.sidecar("/v1/memory-files").get("files", [])
    return any(f["path"] == NOTE and f["size"] == size and f["chunks"] > 0 for f in files)


def write_note(run: Run, workspace: Path, fact: str, label: str) -> JsonObj:
    """Write (or rewrite) the note and wait for the sidecar's own pass to index it."""
    path = workspace / NOTE
    path.parent.mkdir(parents=True, exist_ok=True)
    text = note_text(fact)
    path.write_text(text)
    size = len(text.encode())
    began = time.monotonic()
    with run.timed(f"memoryFile:{label}"):
        done = wait_until(lambda: indexed(run, size), timeout=INDEX_WAIT, interval=0.5)
    return {"indexed": done, "seconds": round(time.monotonic() - began, 2)}


def scenario_memory_file(run: Run) -> JsonObj:
    if not run.sidecar_pid():  # played alone (--only): the plugin starts its sidecar at the first turn
        run.turn("Hello.")
    listed = run.gateway_call("agents.files.list", {"agentId": "main"})
    workspace = Path(str(listed["workspace"]))
    if run.sidecar_mode == "stub":  # it indexes no memory files
        return {"workspace": str(workspace), "home": str(run.home)}
    written = write_note(run, workspace, OLD_FACT, "written")
    created = run.gateway_call(
        "sessions.create",
        {"agentId": "main", "parentSessionKey": MAIN_KEY, "emitCommandHooks": True, "succeedsParent": False},
    )
    key = str(created.get("key") or "")
    question = "Where is the spare key to the boathouse?"
    before = run.turn(f"New chat. {question}", session_key=key)
    requests_at_edit = len(run.requests_log.read_text().splitlines())
    edited = write_note(run, workspace, NEW_FACT, "edited")
    after = run.turn(f"Again, now: {question}", session_key=key)
    return {
        "workspace": str(workspace),
        "home": str(run.home),
        "written": written,
        "edited": edited,
        "newKey": key,
        "before": before.view(),
        "after": after.view(),
        "requestsAtEdit": requests_at_edit,
        "listing": run.sidecar("/v1/memory-files").get("files", []),
        "oldRows": run.rows_holding(OLD_PROBE),
        "newRows": run.rows_holding(NEW_PROBE),
    }
