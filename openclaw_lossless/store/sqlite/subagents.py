"""Subagent links, and the outcome a finished child hands to its parent.

A spawn registers the child's session and links it to its parent by session key (a rollback undoes both).
The parent's recall scope leaves the child's transcript out (``sessions.recall_scope``). When the child
ends, its final answer (its last assistant message with text, not a tool call) and any message graded
must-remember are copied into the parent's session as ``outcome`` records that cite the child's messages:
the parent can recall what the child found without inheriting its whole transcript.
"""

from __future__ import annotations

import time
from functools import partial

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.capture.importance import MUST_REMEMBER
from openclaw_lossless.capture.records import storable
from openclaw_lossless.store.model.sessions import SessionRef, agent_of
from openclaw_lossless.store.model.subagents import (
    OUTCOME_SOURCE,
    OUTCOME_TEXT,
    Outcome,
    copy_outcomes,
    final_answer,
    first_answer,
    inherited_ids,
    outcomes,
)
from openclaw_lossless.store.sqlite import message_days
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.sqlite.messages import is_forgotten, queue_for_embedding
from openclaw_lossless.store.sqlite.sessions import latest_session_for_key, register_spawned
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
