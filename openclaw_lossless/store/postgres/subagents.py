"""Subagent links and outcomes on PostgreSQL: the SQLite module's calls (``store/sqlite/subagents.py``), safe
with several sidecars.

What holds no SQL is the SQLite module's: which message is the child's answer (``final_answer``), which
messages the parent inherits (``inherited_ids``) and the outcome records built from them (``outcomes``,
``copy_outcomes``), so both backends copy the same records with the same hashes.
Several sidecars may report one child's end at the same moment (the host retries a hook on another sidecar):
``end`` first updates the link's row, which locks it, so a second end waits for the first to commit; its
copies then meet the first's rows (``ON CONFLICT (session_rowid, content_hash) DO NOTHING``) and nothing is
copied twice. A spawn on two sidecars at once links the child once (``ON CONFLICT (child_session_key)``).
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
from openclaw_lossless.store.postgres import message_days
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.messages import (
    date_terms,
    hold_id_order,
    is_forgotten,
    pg_text,
    queue_for_embedding,
)
from openclaw_lossless.store.postgres.sessions import latest_session_for_key, register_spawned
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.spawns import Spawned


def _text(text: str) -> str:
    return pg_text(storable(text))


def _never_a_key(key: str) -> bool:
    """A key with a NUL was never linked (``link`` checks keys), and PostgreSQL cannot even compare one: the
    host is told "not linked", as SQLite tells it, rather than a server error."""
    return "\x00" in key


unlink = Spawned(POSTGRES).unlink  # a spawn undone: the same statements on both backends


def link(conn: Connection, parent_key: str, child_key: str, context_mode: str | None) -> int:
    """Register the child's session and link it to its parent; returns the spawn id a rollback names."""
    agent_of(parent_key)
    agent_of(child_key)
    row = conn.execute(
        "INSERT INTO subagent_links (parent_session_key, child_session_key, context_mode, spawned_at)"
        " VALUES (%s, %s, %s, %s) ON CONFLICT (child_session_key) DO UPDATE SET parent_session_key = excluded."
        "parent_session_key, context_mode = excluded.context_mode, ended_at = NULL, ended_reason = NULL"
        " RETURNING id",
        (parent_key, child_key, None if context_mode is None else _text(context_mode), time.time()),
    ).fetchone()
    assert row is not None  # DO UPDATE returns the row, inserted or updated
    register_spawned(conn, child_key)
    return int(row[0])


def end(conn: Connection, child_key: str, reason: str) -> tuple[bool, int]:
    """Mark the child ended and copy its outcome into the parent; returns (linked, outcomes copied).

    The update locks the link until this transaction ends: a concurrent end of the same child waits, then
    finds the outcome already copied.
    """
    if _never_a_key(child_key):
        return False, 0
    row = conn.execute(
        "UPDATE subagent_links SET ended_at = coalesce(ended_at, %s), ended_reason = %s"
        " WHERE child_session_key = %s RETURNING parent_session_key",
        (time.time(), _text(reason), child_key),
    ).fetchone()
    if row is None:
        return False, 0
    parent = latest_session_for_key(conn, str(row[0]))
    if parent is None:
        return True, 0
    return True, _copy_outcome(conn, child_key, parent)


def _outcome_ids(conn: Connection, child_key: str) -> list[int]:
    """The child's messages its parent inherits: the final answer and every must-remember message.

    Read along ``messages_by_session``: the child's own messages only, never the rest of the history.
    """
    sessions = [int(r[0]) for r in conn.execute("SELECT id FROM sessions WHERE session_key = %s", (child_key,))]
    chosen = [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM messages WHERE session_rowid = ANY(%s::bigint[]) AND kind = 'message' AND importance >= %s",
            (sessions, MUST_REMEMBER),
        )
    ]
    return inherited_ids(chosen, final_answer(sessions, lambda session: _answer_in(conn, session)))


def _answer_in(conn: Connection, session: int) -> int | None:
    """The session's last answer (``first_answer``); the rows come a few at a time (a server-side cursor), so
    a long tool-call tail costs what it holds."""
    with conn.cursor(name="final_answer") as cursor:
        cursor.itersize = 20
        cursor.execute(
            "SELECT id, original FROM messages WHERE session_rowid = %s AND role = 'assistant'"
            " AND kind = 'message' ORDER BY id DESC",
            (session,),
        )
        return first_answer(cursor)


def _copy_outcome(conn: Connection, child_key: str, parent: SessionRef) -> int:
    ids = _outcome_ids(conn, child_key)
    if not ids:
        return 0
    rows = conn.execute(
        f"SELECT {OUTCOME_SOURCE} FROM messages WHERE id = ANY(%s::bigint[]) ORDER BY id", (ids,)
    ).fetchall()
    found = outcomes(child_key, rows)
    copied = copy_outcomes(found, parent, partial(is_forgotten, conn), partial(_insert_outcome, conn, parent))
    queue_for_embedding(conn, copied)
    return len(copied)


def _insert_outcome(conn: Connection, parent: SessionRef, outcome: Outcome) -> int | None:
    hold_id_order(conn)
    values = outcome.values(parent, time.time())
    stored = conn.execute(
        "INSERT INTO messages (session_rowid, agent_id, role, kind, created_at, stored_at, text, original,"
        " content_hash, window_key, tokens, importance, importance_label, cites, date_terms, grams)"
        " VALUES (%s, %s, %s, 'outcome', %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        " ON CONFLICT DO NOTHING RETURNING id",
        (*values, date_terms(outcome.created_at), gram_text(str(values[OUTCOME_TEXT]))),
    ).fetchone()
    if stored is None:
        return None
    new_id = int(stored[0])
    message_days.index(conn, new_id, outcome.role, outcome.text, outcome.created_at)
    return new_id
