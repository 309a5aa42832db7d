"""The plugin's spool, stored by the sidecar itself before a forget.

When the sidecar did not answer a commit, the plugin kept the turn in ``<state dir>/spool/`` (``plugin/spool.js``)
and sends it at its next commit that reaches the sidecar. A forget must not miss those turns and have them
stored after it: so every forget first stores each spooled turn it can read here, exactly as the commit hook
would (idempotent on the turn's advancement key), and removes its file. See docs/decisions/0222-outage-spool.md.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from pydantic import ValidationError

from openclaw_lossless.api.deps import recall_settings
from openclaw_lossless.api.schemas import CommitTurnRequest
from openclaw_lossless.sidecar import Sidecar

log = logging.getLogger(__name__)

SPOOL_DIR = "spool"
RECORD_SUFFIX = ".turn.json"
RECORD_FORMAT = "openclaw-lossless spool v1"


def spooled(state_dir: Path) -> list[Path]:
    """The spooled turns' files, oldest first (their names sort in spooling order)."""
    folder = state_dir / SPOOL_DIR
    try:
        return sorted(p for p in folder.iterdir() if p.name.endswith(RECORD_SUFFIX))
    except FileNotFoundError:
        return []
    except OSError as error:  # another user's spool (a container on the plugin's dir): the forget goes on
        log.warning("the plugin's spool %s cannot be read: %s", folder, type(error).__name__)
        return []


def _request(path: Path) -> CommitTurnRequest | None:
    """The commit a record holds, or None (logged by name and reason only) when it cannot be read."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(record, dict) or record.get("format") != RECORD_FORMAT or record.get("hook") != "commitTurn":
            raise ValueError("not a spool record")
        return CommitTurnRequest.model_validate(record.get("body"))
    except FileNotFoundError:
        return None  # the plugin sent it meanwhile
    except (OSError, ValueError, ValidationError) as error:
        log.warning("spooled turn %s left in place: %s", path.name, type(error).__name__)
        return None


def store_spooled(sidecar: Sidecar) -> int:
    """Store every readable spooled turn, oldest first, and remove its file; how many were committed."""
    stored, ingest, settings = 0, sidecar.ingest, sidecar.settings
    for path in spooled(settings.state_dir):
        body = _request(path)
        if body is None:
            continue
        done = ingest.commit_turn(
            body.advancement_key,
            body.session_id,
            body.session_key,
            body.messages,
            heartbeat=body.is_heartbeat,
            recall=recall_settings(settings, body.config),
        )
        path.unlink(missing_ok=True)
        stored += done.status == "committed"
    if stored:
        log.info("stored %d turns of the plugin's spool", stored)
    return stored
