"""Forgetting: remove messages on request, for good, and keep them from coming back.

A selection (citations, a session, an agent, a time range, a keyword query; every selector given must hold)
is first planned: exactly the messages that would go, in the hot store and in the gzip archives. Bad input
changes nothing: an unknown citation, session or agent, a query without words, a selection of nothing, and a
time range alone that selects every message without ``all``.

Forgetting then, in one write transaction (the single writer serialises it with every commit, so an agent
mid-turn sees its turn whole, before or after): a tombstone per message (its session and identity, never its
text, table ``forgotten``), the deletion of the message, its vector, its place on the backlog and any
subagent outcome record citing it (and, when a whole session goes, its compaction summaries and snapshots),
with ``secure_delete`` on so freed content is zeroed, and an FTS5 ``optimize`` so the index segments that
held its words are rewritten. After the commit, a TRUNCATE checkpoint empties the WAL and the free pages are
given back; the archives are rewritten without its lines. ``insert_row`` refuses a tombstoned identity, so a
replayed turn, an import of the host's transcripts or of an older export does not bring it back.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from openclaw_lossless.store.model.forgetting import (
    WORD,
    ForgettingIndex,
    Forgotten,
    Named,
    Plan,
    Selector,
    archived_named,
    is_dated,
    line_identities,
    named_row,
    narrowed,
    rewrite_archive_files,
    settle,
)
from openclaw_lossless.store.model.rewrite import cache_key
from openclaw_lossless.store.sqlite import meta, vectors
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.messages import keep_ids_given
from openclaw_lossless.store.sqlite.migrations import FREE_SPACE_ZEROED
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements import forgetting as shared
from openclaw_lossless.store.statements.forgetting import forgotten_count as forgotten_count
from openclaw_lossless.store.statements.forgetting import resurrected as resurrected

# -- planning -----------------------------------------------------------------------------------------------


def plan(conn: Connection, archive_dir: Path, selector: Selector) -> Plan:
    """What ``selector`` names, or a ``BadRequest``/``NotFound`` saying what to fix (nothing is changed)."""
    shared.check_stored(SQLITE, conn, selector)
    found = Plan(stored=_stored(conn, selector))
    found.archived = list(archived_named(archive_dir, selector, {row.id for row in found.stored}))
    return settle(found, selector, lambda: _count(conn))


def _count(conn: Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def fts_query(match: str) -> str:
    """Every word of the query, each quoted (no FTS5 syntax gets through), all required."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in WORD.findall(match))


def _stored(conn: Connection, selector: Selector) -> list[Named]:
    clauses, params = _where(selector)
    if selector.match is not None:
        clauses.append("m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)")
        params.append("{text} : (" + fts_query(selector.match) + ")")
    rows = conn.execute(
        "SELECT m.id, m.created_at, m.role, s.session_id, m.agent_id, m.text FROM messages m"
        f" JOIN sessions s ON s.id = m.session_rowid WHERE {' AND '.join(clauses)} ORDER BY m.id",
        params,
    ).fetchall()
    selected = [named_row(r) for r in rows]
    ids = [row.id for row in selected]
    return selected + _outcomes(conn, ids)


def _where(selector: Selector) -> tuple[list[str], list[Any]]:
    clauses: list[str] = ["1"]
    params: list[Any] = []
    if selector.ids:
        clauses.append("m.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(set(selector.ids))))
    return narrowed(selector, "?", clauses, params)


def _outcomes(conn: Connection, ids: list[int]) -> list[Named]:
    """Subagent outcome records citing a selected message: copies of its text in the parent's session."""
    if not ids:
        return []
    rows = conn.execute(
        "SELECT m.id, m.created_at, m.role, s.session_id, m.agent_id, m.text FROM messages m"
        " JOIN sessions s ON s.id = m.session_rowid WHERE m.kind = 'outcome'"
        " AND m.cites IN (SELECT value FROM json_each(?)) AND m.id NOT IN (SELECT value FROM json_each(?))"
        " ORDER BY m.id",
        (json.dumps(ids), json.dumps(ids)),
    ).fetchall()
    return [named_row(r) for r in rows]


# -- forgetting ---------------------------------------------------------------------------------------------


def forget(db: Database, index: ForgettingIndex | None, archive_dir: Path, found: Plan) -> tuple[int, int, bool]:
    """Remove what ``found`` names from the store, the vector index and the archives; returns the messages
    removed, the archive files rewritten and whether the write-ahead log was truncated."""
    ids = [row.id for row in found.stored]
    removed = db.write(lambda conn: _remove(conn, ids, found.sessions, found.archived))
    if index is not None:
        index.forget_ids(ids)
    zero_old_free_space(db)
    truncated = scrub_files(db)
    rewritten = rewrite_archives(db.reader(), archive_dir)
    return removed, rewritten, truncated


def _remove(conn: Connection, ids: list[int], sessions: list[str], archived: list[Named]) -> int:
    conn.execute("PRAGMA secure_delete = ON")  # freed cells and pages are zeroed, not left for a hex editor
    now = time.time()
    marks = json.dumps(ids)
    conn.execute(
        "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " SELECT s.session_id, m.content_hash, CASE WHEN json_type(m.original, '$.timestamp') IN ('integer', 'real')"
        " THEN m.window_key END, m.id, ? FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        " WHERE m.id IN (SELECT value FROM json_each(?))",
        (now, marks),
    )
    for named in archived:
        if named.record is not None:
            _tombstone_archived(conn, named.record, now)
    conn.execute(  # a tombstone names them now; the archived identity goes with the line (m012)
        "DELETE FROM archived WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"
        " AND m.session_rowid = archived.session_rowid AND m.content_hash = archived.content_hash)",
        (marks,),
    )
    removed = delete_messages(conn, ids)
    for session_id in sessions:
        _forget_summaries(conn, session_id)
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")  # rewrites the segments
    return removed


def delete_messages(conn: Connection, ids: Sequence[int]) -> int:
    """Delete messages with their vectors and backlog entries (the FTS trigger drops their index rows)."""
    conn.execute("PRAGMA secure_delete = ON")
    keep_ids_given(conn, ids)  # a forgotten message's citation is never given to a new one
    marks = json.dumps(list(ids))
    texts = conn.execute("SELECT text FROM messages WHERE id IN (SELECT value FROM json_each(?))", (marks,))
    keys = [(cache_key(str(row[0])),) for row in texts.fetchall()]  # the cached embedding of its text goes too
    conn.executemany("DELETE FROM embedding_cache WHERE text_hash = ?", keys)
    vectors.delete(conn, ids)  # sqlite-vec zeroes the deleted codes in place; secure_delete wipes freed pages
    conn.execute("DELETE FROM embedding_backlog WHERE message_id IN (SELECT value FROM json_each(?))", (marks,))
    return int(conn.execute("DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?))", (marks,)).rowcount)


def honour(conn: Connection, session_id: str, content_hash: bytes, window_key: str | None, at: float) -> bool:
    """Record an imported tombstone and forget what it names here; False when the store already had it."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " VALUES (?, ?, ?, NULL, ?)",
        (session_id, content_hash, window_key, at),
    )
    if not cursor.rowcount:
        return False
    shared.drop_archived_identity(SQLITE, conn, session_id, content_hash)
    rows = conn.execute(
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_rowid WHERE s.session_id = ?"
        " AND (m.content_hash = ? OR (? IS NOT NULL AND m.window_key = ?))",
        (session_id, content_hash, window_key, window_key),
    ).fetchall()
    delete_messages(conn, [int(r[0]) for r in rows])
    return True


def _tombstone_archived(conn: Connection, record: dict[str, Any], now: float) -> None:
    dated = is_dated(record)
    with contextlib.suppress(ValueError, TypeError):
        shared.drop_archived_identity(SQLITE, conn, str(record["sessionId"]), bytes.fromhex(str(record["contentHash"])))
        conn.execute(
            "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                str(record["sessionId"]),
                bytes.fromhex(str(record["contentHash"])),
                record.get("windowKey") if dated else None,
                record.get("id"),
                now,
            ),
        )


def _forget_summaries(conn: Connection, session_id: str) -> None:
    """A session forgotten whole loses its compaction summaries (the host's words about it) and snapshots."""
    row = conn.execute("SELECT id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        return
    conn.execute("DELETE FROM snapshots WHERE session_rowid = ?", (row[0],))
    conn.execute("DELETE FROM compactions WHERE session_rowid = ?", (row[0],))


def zero_old_free_space(db: Database) -> None:
    """On a store written before every write connection zeroed what it freed, rebuild the file once
    (``VACUUM``): free blocks left by rows an UPDATE moved may hold any message's old bytes, a forgotten one's
    too. A store created since, or rebuilt once, is marked and never rebuilt again (decision 0100)."""
    if meta.get(db.reader(), FREE_SPACE_ZEROED) is not None:
        return
    with db.writer() as conn:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # an older file takes it at the rebuild
        conn.execute("VACUUM")
    db.write(lambda conn: meta.put(conn, FREE_SPACE_ZEROED, "1"))


def scrub_files(db: Database) -> bool:
    """Empty the WAL (its frames still hold the old pages) and give free pages back; True when it emptied.

    A TRUNCATE checkpoint waits for readers (busy timeout); a reader holding an old snapshot for longer makes
    it report busy, and it is tried again a few times.
    """
    with db.writer() as conn:
        conn.execute("PRAGMA incremental_vacuum")
        for _ in range(5):
            busy = int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
            if not busy:
                return True
            time.sleep(0.2)
    return False


def rewrite_archives(conn: Connection, archive_dir: Path) -> int:
    """Rewrite every archive holding a tombstoned message without its line (atomically, 0600); returns how many."""
    return rewrite_archive_files(archive_dir, lambda raws: _tombstoned(conn, raws))


def _tombstoned(conn: Connection, raws: list[bytes]) -> set[int]:
    """The positions of the lines a tombstone names."""
    return {
        n
        for n, session_id, digest in line_identities(raws)
        if conn.execute(
            "SELECT 1 FROM forgotten WHERE session_id = ? AND content_hash = ?", (session_id, digest)
        ).fetchone()
        is not None
    }


def run(
    db: Database, index: ForgettingIndex | None, archive_dir: Path, selector: Selector, *, dry_run: bool
) -> Forgotten:
    """Plan, then (unless ``dry_run``) forget exactly what the plan shows; the view lists every message."""
    found = plan(db.reader(), archive_dir, selector)
    view = found.view(dry_run=dry_run, full_text=selector.match is not None)
    if dry_run:
        return view
    removed, rewritten, truncated = forget(db, index, archive_dir, found)
    return replace(view, removed=removed, archive_files_rewritten=rewritten, wal_truncated=truncated)
