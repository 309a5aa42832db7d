"""Heartbeat turns the store chose not to keep stay out when the transcripts are read back.

With ``skipHeartbeats`` a heartbeat turn is committed without its messages, but the host's transcript keeps
them; catch-up and ``import`` read the transcript, so without a record of what was left out they would store
the heartbeats after all (and the gap report would count them as missing). The commit records each left-out
message's window key (role, timestamp, text: ``capture.text.window_key``) in ``meta``, one row per message,
in the commit's own transaction; readers skip a message recorded so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from openclaw_lossless.capture.text import window_key
from openclaw_lossless.store.backend import Backend

PREFIX = "skipped.heartbeat."


def remember(ops: Backend, conn: Any, session_id: str, raw: Sequence[Any]) -> None:
    """Record the messages of a heartbeat turn committed without them."""
    keys = {window_key(message) for message in raw if isinstance(message, dict)}
    ops.transcript_ledger.mark_all(conn, (f"{PREFIX}{session_id}.{key}" for key in keys))


def keys_of(ops: Backend, conn: Any, session_id: str) -> frozenset[str]:
    """The window keys of the session's left-out heartbeat messages (one range of meta's primary key)."""
    prefix = f"{PREFIX}{session_id}."
    return frozenset(key[len(prefix) :] for key in ops.transcript_ledger.keys_under(conn, prefix))
