"""Subagent links, and the outcome a finished child hands to its parent.

A child session is linked to its parent by session key at spawn (undone on rollback). When the child ends,
its final assistant answer and any message graded must-remember are copied into the parent's session as
``outcome`` records that cite the child's messages: the parent can recall what the child found without
inheriting its whole transcript.
"""

from __future__ import annotations

import hashlib
import json
import time

from openclaw_lossless.capture.importance import MUST_REMEMBER
from openclaw_lossless.capture.records import storable
from openclaw_lossless.store.connection import Connection
from openclaw_lossless.store.messages import queue_for_embedding
from openclaw_lossless.store.sessions import SessionRef, agent_of, latest_session_for_key


def link(conn: Connection, parent_key: str, child_key: str, context_mode: str | None) -> int:
    agent_of(parent_key)
    agent_of(child_key)
    cursor = conn.execute(
        "INSERT INTO subagent_links (parent_session_key, child_session_key, context_mode, spawned_at)"
        " VALUES (?, ?, ?, ?) ON CONFLICT(child_session_key) DO UPDATE SET parent_session_key = excluded."
        "parent_session_key, context_mode = excluded.context_mode, ended_at = NULL, ended_reason = NULL"
        " RETURNING id",
        (parent_key, child_key, None if context_mode is None else storable(context_mode), time.time()),
    )
    return int(cursor.fetchone()[0])


def unlink(conn: Connection, spawn_id: int | None, child_key: str | None) -> bool:
    if spawn_id is not None:
        cursor = conn.execute("DELETE FROM subagent_links WHERE id = ? AND ended_at IS NULL", (spawn_id,))
    else:
        cursor = conn.execute(
            "DELETE FROM subagent_links WHERE child_session_key = ? AND ended_at IS NULL", (child_key,)
        )
    return bool(cursor.rowcount)


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


def _copy_outcome(conn: Connection, child_key: str, parent: SessionRef) -> int:
    rows = conn.execute(
        "SELECT m.id, m.role, m.created_at, m.text, m.window_key, m.tokens, m.importance, m.importance_label"
        " FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        " WHERE s.session_key = ? AND m.kind = 'message' AND (m.importance >= ? OR m.id = ("
        "   SELECT max(m2.id) FROM messages m2 JOIN sessions s2 ON s2.id = m2.session_rowid"
        "   WHERE s2.session_key = ? AND m2.role = 'assistant' AND m2.text != ''))",
        (child_key, MUST_REMEMBER, child_key),
    ).fetchall()
    copied: list[int] = []
    for msg_id, role, created_at, text, key, tokens, importance, label in rows:
        original = json.dumps({"kind": "subagentOutcome", "childSessionKey": child_key, "cites": f"msg:{msg_id}"})
        digest = hashlib.sha256(f"outcome:{msg_id}".encode()).digest()
        cursor = conn.execute(
            "INSERT OR IGNORE INTO messages (session_rowid, agent_id, role, kind, created_at, stored_at, text,"
            " original, content_hash, window_key, tokens, importance, importance_label, cites)"
            " VALUES (?, ?, ?, 'outcome', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                parent.rowid,
                parent.agent_id,
                role,
                created_at,
                time.time(),
                f"[subagent result] {text}",
                original,
                digest,
                key,
                tokens,
                importance,
                label,
                msg_id,
            ),
        )
        if cursor.rowcount:
            copied.append(int(cursor.lastrowid))
    queue_for_embedding(conn, copied)
    return len(copied)
