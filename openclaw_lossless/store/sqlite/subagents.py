"""Subagent links, and the outcome a finished child hands to its parent.

A spawn registers the child's session and links it to its parent by session key (a rollback undoes both).
The parent's recall scope leaves the child's transcript out (``sessions.recall_scope``). When the child
ends, its final answer (its last assistant message with text, not a tool call) and any message graded
must-remember are copied into the parent's session as ``outcome`` records that cite the child's messages:
the parent can recall what the child found without inheriting its whole transcript.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.capture.importance import MUST_REMEMBER
from openclaw_lossless.capture.records import storable
from openclaw_lossless.capture.text import descriptor_text
from openclaw_lossless.store.sqlite import message_days
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.sqlite.messages import is_forgotten, queue_for_embedding
from openclaw_lossless.store.sqlite.sessions import (
    SessionRef,
    agent_of,
    latest_session_for_key,
    register_spawned,
)
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.spawns import Spawned

unlink = Spawned(SQLITE).unlink  # a spawn undone: the same statements on both backends


def link(conn: Connection, parent_key: str, child_key: str, context_mode: str | None) -> int:
    """Register the child's session and link it to its parent; returns the spawn id a rollback names."""
    agent_of(parent_key)
    agent_of(child_key)
    cursor = conn.execute(
        "INSERT INTO subagent_links (parent_session_key, child_session_key, context_mode, spawned_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT(child_session_key) DO UPDATE SET parent_session_key = excluded."
        "parent_session_key, context_mode = excluded.context_mode, ended_at = NULL, ended_reason = NULL"
        " RETURNING id",
        (parent_key, child_key, None if context_mode is None else storable(context_mode), time.time()),
    )
    spawn_id = int(cursor.fetchone()[0])
    register_spawned(conn, child_key)
    return spawn_id


def end(conn: Connection, child_key: str, reason: str) -> tuple[bool, int]:
    """Mark the child ended and copy its outcome into the parent; returns (linked, outcomes copied)."""
    row = conn.execute(
        "SELECT parent_session_key FROM subagent_links WHERE child_session_key = ?", (child_key,)
    ).fetchone()
    if row is None:
        return False, 0
    conn.execute(
        "UPDATE subagent_links SET ended_at = coalesce(ended_at, ?), ended_reason = ? WHERE child_session_key = ?",
        (time.time(), storable(reason), child_key),
    )
    parent = latest_session_for_key(conn, str(row[0]))
    if parent is None:
        return True, 0
    return True, _copy_outcome(conn, child_key, parent)


def _outcome_ids(conn: Connection, child_key: str) -> list[int]:
    """The child's messages its parent inherits: the final answer and every must-remember message.

    Read along ``messages_by_session``: the child's own messages only, never the rest of the history.
    """
    sessions = [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE session_key = ?", (child_key,))]
    chosen: set[int] = set()
    for session in sessions:
        chosen.update(
            int(r[0])
            for r in conn.execute(
                "SELECT id FROM messages WHERE session_rowid = ? AND kind = 'message' AND importance >= ?",
                (session, MUST_REMEMBER),
            )
        )
    return inherited_ids(chosen, final_answer(sessions, lambda session: _answer_in(conn, session)))


def _answer_in(conn: Connection, session: int) -> int | None:
    rows = conn.execute(
        "SELECT id, original FROM messages WHERE session_rowid = ? AND role = 'assistant' AND kind = 'message'"
        " ORDER BY id DESC",
        (session,),
    )
    return first_answer(rows)


def inherited_ids(must_remember: Iterable[int], answer: int | None) -> list[int]:
    """The ids a parent inherits, in order: the must-remember messages and the final answer (both backends)."""
    return sorted({*must_remember, *(() if answer is None else (answer,))})


def final_answer(sessions: Iterable[int], answer_in: Callable[[int], int | None]) -> int | None:
    """The child's last assistant message with text of its own (tool calls alone are not an answer): the
    newest of each session's answer, which ``answer_in`` finds (both backends walk the child's sessions so)."""
    return max((a for a in map(answer_in, sessions) if a is not None), default=None)


def first_answer(rows: Iterable[Sequence[Any]]) -> int | None:
    """The first ``(id, original)`` row that is an answer, reading no further: a session's assistant messages
    newest first, so both backends stop at the last answer without reading the rest of the history."""
    return next((int(msg_id) for msg_id, original in rows if _is_answer(json.loads(original))), None)


def _is_answer(message: Any) -> bool:
    """Text the child said, in a message that asks for no tool: what a person would call its answer."""
    if not isinstance(message, dict) or not descriptor_text(message).strip():
        return False
    content = message.get("content")
    blocks = content if isinstance(content, list) else []
    return not any(isinstance(block, dict) and block.get("type") == "toolCall" for block in blocks)


def outcome_identity(child_key: str, cites: int) -> tuple[str, bytes]:
    """An outcome record's original and content hash, from the child and the message it cites.

    Derived, never stored apart: the import rebuilds it the same way, so an outcome whose cited message got a
    new id on import names the new one, and the child ending again later finds it already copied.
    """
    original = json.dumps({"kind": "subagentOutcome", "childSessionKey": child_key, "cites": f"msg:{cites}"})
    return original, hashlib.sha256(f"outcome:{cites}".encode()).digest()


def _copy_outcome(conn: Connection, child_key: str, parent: SessionRef) -> int:
    ids = _outcome_ids(conn, child_key)
    if not ids:
        return 0
    marks = ",".join("?" * len(ids))
    rows = conn.execute(f"SELECT {OUTCOME_SOURCE} FROM messages WHERE id IN ({marks}) ORDER BY id", ids).fetchall()
    found = outcomes(child_key, rows)
    copied = copy_outcomes(found, parent, partial(is_forgotten, conn), partial(_insert_outcome, conn, parent))
    queue_for_embedding(conn, copied)
    return len(copied)


def _insert_outcome(conn: Connection, parent: SessionRef, outcome: Outcome) -> int | None:
    values = outcome.values(parent, time.time())
    cursor = conn.execute(
        "INSERT OR IGNORE INTO messages (session_rowid, agent_id, role, kind, created_at, stored_at, text,"
        " original, content_hash, window_key, tokens, importance, importance_label, cites, grams)"
        " VALUES (?, ?, ?, 'outcome', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (*values, gram_text(str(values[OUTCOME_TEXT]))),
    )
    if not cursor.rowcount:
        return None
    new_id = int(cursor.lastrowid)
    message_days.index(conn, new_id, outcome.role, outcome.text, outcome.created_at)
    return new_id


OUTCOME_TEXT = 5  # where ``Outcome.values`` puts the stored text
OUTCOME_SOURCE = "id, role, created_at, text, window_key, tokens, importance, importance_label"


@dataclass(frozen=True)
class Outcome:
    """A child's message its parent inherits, as the outcome record that cites it (``OUTCOME_SOURCE`` row)."""

    cites: int
    role: str
    created_at: float
    text: str  # the child's text; the parent stores it marked as the subagent's result
    window_key: str
    tokens: int | None
    importance: float | None
    importance_label: str | None
    original: str
    content_hash: bytes

    def values(self, parent: SessionRef, stored_at: float) -> tuple[object, ...]:
        """The record's values in the column order both backends' inserts name, ``session_rowid`` to ``cites``
        (``kind`` is the literal ``'outcome'``)."""
        return (
            parent.rowid,
            parent.agent_id,
            self.role,
            self.created_at,
            stored_at,
            f"[subagent result] {self.text}",
            self.original,
            self.content_hash,
            self.window_key,
            self.tokens,
            self.importance,
            self.importance_label,
            self.cites,
        )


def outcomes(child_key: str, rows: Iterable[Sequence[Any]]) -> list[Outcome]:
    """``OUTCOME_SOURCE`` rows as the outcome records both backends copy, each with its derived identity."""
    found: list[Outcome] = []
    for msg_id, role, created_at, text, key, tokens, importance, label in rows:
        original, digest = outcome_identity(child_key, int(msg_id))
        found.append(Outcome(int(msg_id), role, created_at, text, key, tokens, importance, label, original, digest))
    return found


def copy_outcomes(
    found: Iterable[Outcome],
    parent: SessionRef,
    forgotten: Callable[[str, bytes, str], bool],
    insert: Callable[[Outcome], int | None],
) -> list[int]:
    """The ids of the outcomes ``insert`` stored in ``parent`` (it answers None for one the parent already
    holds); one ``forgotten(session_id, content_hash, window_key)`` names is never copied again. Both backends
    copy through this, each with its own statements."""
    return [
        new_id
        for outcome in found
        if not forgotten(parent.session_id, outcome.content_hash, outcome.window_key)
        and (new_id := insert(outcome)) is not None
    ]
