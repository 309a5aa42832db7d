"""Is the OpenClaw gateway running on this state dir? Read from the lock it holds while it runs.

OpenClaw 2026.9's gateway writes ``<state>/tmp/openclaw-<uid>/gateway.state.lock`` (JSON: ``pid``, ``port``,
``configPath``, ``stateDir``, ...) when it starts and removes it when it stops. A lock left by a killed
gateway names a pid that is gone (or, after reuse, a process that is not OpenClaw's), so both are checked.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

LOCK_NAME = "gateway.state.lock"


def lock_path(openclaw_state: Path) -> Path:
    suffix = f"openclaw-{os.getuid()}" if hasattr(os, "getuid") else "openclaw"
    return openclaw_state / "tmp" / suffix / LOCK_NAME


def running_gateway(openclaw_state: Path) -> dict[str, Any] | None:
    """``{"pid", "port"}`` of the gateway running on this state dir, or None when none is."""
    try:
        payload = json.loads(lock_path(openclaw_state).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    pid = payload.get("pid") if isinstance(payload, dict) else None
    if not isinstance(pid, int) or pid <= 0 or not _alive(pid):
        return None
    return {"pid": pid, "port": payload.get("port")}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to inspect further
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc here: a live pid is the best evidence there is
    return b"openclaw" in command
