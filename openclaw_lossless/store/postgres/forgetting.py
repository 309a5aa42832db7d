"""Forgetting on PostgreSQL: the SQLite module's calls (``store/sqlite/forgetting.py``) for a shared store.

The meaning is the SQLite module's: a selection is planned first (every given selector must hold; bad input
changes nothing), then exactly the planned messages go in one write transaction: a tombstone per message
(table ``forgotten``: its session and identity, never its text), the message with its vector and days
(``ON DELETE CASCADE``), its place on the backlog, any outcome record citing it and, when a whole session
goes, its compaction summaries and snapshots. ``messages.insert_records`` and ``insert_row`` refuse what a
tombstone names, so a replayed turn, an import or another sidecar's catch-up never stores it again.

Zeroing what was freed: PostgreSQL has no ``secure_delete``. After the commit, on an autocommit connection
(neither runs inside a transaction block), the touched tables are ``VACUUM``-ed and the keyword index is
rebuilt (``REINDEX INDEX CONCURRENTLY``: a GIN index keeps a word as a key after its last row is gone).
Measured on PostgreSQL 18 (``tests/postgres/backend/test_forget.py``): afterwards no byte of the forgotten text
is left in the data files of the messages table, its TOAST table or the keyword index. What this does not
reach: the server's WAL, base backups and replicas keep the bytes until they are recycled, and a row still
visible to a transaction older than the forget (a long export on another sidecar) waits for the next
vacuum. ``VACUUM FULL`` would lock every sidecar out of the tables while it ran, so it is left to the
operator. ``Forgotten.wal_truncated`` reports here whether the VACUUM and the REINDEX ran to their end. The
REINDEX reads the whole table, as FTS5's ``optimize`` does on SQLite (its cost: docs/decisions/0010).

A forget holds the store's archive lock (``archive.store_lock``) from its plan to its last rewritten archive,
so no sidecar archives a message while it is being forgotten (it waits for a prune under way to end).

Archives: this sidecar's and the other sidecars' on this host (``archive_dirs``) are rewritten without the
forgotten lines, as on SQLite; what holds no SQL (``Selector``, ``Plan``, reading archives) is shared with it.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

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
from openclaw_lossless.store.postgres import archive, fulltext, messages
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.migrations import INDEXED_CHARS
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements import forgetting as shared
from openclaw_lossless.store.statements.forgetting import forgotten_count as forgotten_count
from openclaw_lossless.store.statements.forgetting import resurrected as resurrected

log = logging.getLogger(__name__)

# What a forget touches: the rows it deletes, and those deleted with them (vectors and days by cascade).
_TOUCHED = ("messages", "message_vectors", "message_days", "embedding_backlog", "embedding_cache")
_TOUCHED_WITH_SESSIONS = (*_TOUCHED, "snapshots", "compactions")
_SELECTED = (
    "SELECT m.id, m.created_at, m.role, s.session_id, m.agent_id, m.text FROM messages m"
    " JOIN sessions s ON s.id = m.session_rowid"
)

__all__ = ["ForgettingIndex", "Forgotten", "Selector", "forgotten_count", "resurrected", "run", "zero_old_free_space"]


# -- planning -----------------------------------------------------------------------------------------------


def zero_old_free_space(db: Database) -> None:
    """Nothing to rebuild: the server's ``VACUUM`` (run after a forget or a rescan) reclaims removed rows."""


def plan(conn: Connection, archive_dir: Path, selector: Selector) -> Plan:
    """What ``selector`` names, or a ``BadRequest``/``NotFound`` saying what to fix (nothing is changed)."""
    shared.check_stored(POSTGRES, conn, selector)
    found = Plan(stored=_stored(conn, selector))
    stored = {row.id for row in found.stored}
    found.archived = [
        named for folder in archive_dirs(conn, archive_dir) for named in archived_named(folder, selector, stored)
    ]
    return settle(found, selector, lambda: messages.count(conn))


def archive_dirs(conn: Connection, archive_dir: Path) -> list[Path]:
    """This sidecar's archive folder, then the folders of the other archives the store records (``archives``)
    that this host can read and write: sidecars sharing a host forget in each other's archives too. An
    archive on another host is out of reach; its lines stay tombstoned, so importing it stores nothing."""
    found = [archive_dir]
    for (path,) in conn.execute("SELECT DISTINCT path FROM archives ORDER BY path"):
        folder = Path(str(path)).parent
        if folder not in found and folder.is_dir() and os.access(folder, os.R_OK | os.W_OK | os.X_OK):
            found.append(folder)
    return found


def text_query(match: str) -> tuple[str, list[str]]:
    """Every word of the match, all required, each as a phrase of its own (as FTS5 reads a quoted word: a word
    the parser splits, ``foo_bar``, must appear as those parts in a row): a tsquery expression and its words."""
    words = WORD.findall(match)
    return " && ".join(["phraseto_tsquery('lossless', %s)"] * len(words)), words


def _stored(conn: Connection, selector: Selector) -> list[Named]:
    clauses, params = _where(selector)
    if selector.match is not None:
        query, words = text_query(selector.match)
        # The index finds candidates by text and date words; the text alone must match (FTS5's ``{text} :``).
        clauses.append(f"m.search @@ ({query}) AND to_tsvector('lossless', left(m.text, {INDEXED_CHARS})) @@ ({query})")
        params.extend(words + words)
    rows = conn.execute(f"{_SELECTED} WHERE {' AND '.join(clauses)} ORDER BY m.id", params).fetchall()
    selected = [named_row(r) for r in rows]
    return selected + _outcomes(conn, [row.id for row in selected])


def _where(selector: Selector) -> tuple[list[str], list[Any]]:
    clauses: list[str] = ["true"]
    params: list[Any] = []
    if selector.ids:
        clauses.append("m.id = ANY(%s::bigint[])")
        params.append(sorted(set(selector.ids)))
    return narrowed(selector, "%s", clauses, params)


def _outcomes(conn: Connection, ids: list[int]) -> list[Named]:
    """Subagent outcome records citing a selected message: copies of its text in the parent's session."""
    if not ids:
        return []
    rows = conn.execute(
        f"{_SELECTED} WHERE m.kind = 'outcome' AND m.cites = ANY(%s::bigint[]) AND m.id <> ALL(%s::bigint[])"
        " ORDER BY m.id",
        (ids, ids),
    ).fetchall()
    return [named_row(r) for r in rows]


# -- forgetting ---------------------------------------------------------------------------------------------


def forget(db: Database, index: ForgettingIndex | None, archive_dir: Path, found: Plan) -> tuple[int, int, bool]:
    """Remove what ``found`` names from the store, the vector index and the archives; returns the messages
    removed, the archive files rewritten and whether the VACUUM of the touched tables ran to its end."""
    ids = [row.id for row in found.stored]
    per_message = archive.bytes_per_message(db.reader())
    removed = db.write(lambda conn: _remove(conn, ids, found.sessions, found.archived))
    if removed:
        fulltext.forget_counts()  # the kept word counts would exceed the corpus now smaller (the IDF's log < 0)
    if index is not None:
        index.forget_ids(ids)
    vacuumed = scrub(db, _TOUCHED_WITH_SESSIONS if found.sessions else _TOUCHED)
    if removed:
        archive.remember_freed(db, per_message)  # the store's used bytes show the forget at once
    rewritten = sum(rewrite_archives(db.reader(), folder) for folder in archive_dirs(db.reader(), archive_dir))
    return removed, rewritten, vacuumed


def _remove(conn: Connection, ids: list[int], sessions: list[str], archived: list[Named]) -> int:
    now = time.time()
    # A dated message's window key names it too (SQLite: json_type(original, '$.timestamp') is a number).
    # An original may hold the escape \u0000, which PostgreSQL's JSON functions refuse: it is read as \u0001
    # (the same six characters but one, so the JSON stays valid whatever precedes it; only the type is read).
    conn.execute(
        "INSERT INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " SELECT s.session_id, m.content_hash, CASE WHEN json_typeof(replace(m.original, '\\u0000', '\\u0001')::json"
        " -> 'timestamp') = 'number' THEN m.window_key END, m.id, %s FROM messages m"
        " JOIN sessions s ON s.id = m.session_rowid"
        " WHERE m.id = ANY(%s::bigint[]) ORDER BY m.id ON CONFLICT DO NOTHING",
        (now, ids),
    )
    for named in archived:
        if named.record is not None:
            _tombstone_archived(conn, named.record, now)
    conn.execute(  # a tombstone names them now; the archived identity goes with the line (m010)
        "DELETE FROM archived a USING messages m WHERE m.id = ANY(%s::bigint[])"
        " AND a.session_rowid = m.session_rowid AND a.content_hash = m.content_hash",
        (ids,),
    )
    removed = delete_messages(conn, ids)
    for session_id in sessions:
        _forget_summaries(conn, session_id)
    return removed


def delete_messages(conn: Connection, ids: Sequence[int]) -> int:
    """Delete messages with their backlog entries (their vectors and days go by ``ON DELETE CASCADE``)."""
    marks = [int(i) for i in ids]
    texts = conn.execute("SELECT text FROM messages WHERE id = ANY(%s::bigint[])", (marks,)).fetchall()
    keys = [cache_key(str(row[0])) for row in texts]  # the cached embedding of its text goes too
    conn.execute("DELETE FROM embedding_cache WHERE text_hash = ANY(%s::bytea[])", (keys,))
    conn.execute("DELETE FROM embedding_backlog WHERE message_id = ANY(%s::bigint[])", (marks,))
    return max(conn.execute("DELETE FROM messages WHERE id = ANY(%s::bigint[])", (marks,)).rowcount, 0)


def honour(conn: Connection, session_id: str, content_hash: bytes, window_key: str | None, at: float) -> bool:
    """Record an imported tombstone and forget what it names here; False when the store already had it."""
    cursor = conn.execute(
        "INSERT INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " VALUES (%s, %s, %s, NULL, %s) ON CONFLICT DO NOTHING",
        (session_id, content_hash, window_key, at),
    )
    if not cursor.rowcount:
        return False
    shared.drop_archived_identity(POSTGRES, conn, session_id, content_hash)
    rows = conn.execute(
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_rowid WHERE s.session_id = %s"
        " AND (m.content_hash = %s OR m.window_key = %s)",
        (session_id, content_hash, window_key),
    ).fetchall()
    delete_messages(conn, [int(r[0]) for r in rows])
    return True


def _tombstone_archived(conn: Connection, record: dict[str, Any], now: float) -> None:
    """A tombstone for an archived line (the export format); a line too damaged to name a message gets none."""
    dated = is_dated(record)
    with contextlib.suppress(ValueError, TypeError, KeyError):
        identity = (str(record["sessionId"]), bytes.fromhex(str(record["contentHash"])))
        shared.drop_archived_identity(POSTGRES, conn, *identity)
        key = record.get("windowKey") if dated else None
        message_id = record.get("id") if isinstance(record.get("id"), int) else None
        conn.execute(
            "INSERT INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
            " VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            (*identity, None if key is None else str(key), message_id, now),
        )


def _forget_summaries(conn: Connection, session_id: str) -> None:
    """A session forgotten whole loses its compaction summaries (the host's words about it) and snapshots."""
    rowid = "(SELECT id FROM sessions WHERE session_id = %s)"
    conn.execute(f"DELETE FROM snapshots WHERE session_rowid = {rowid}", (session_id,))
    conn.execute(f"DELETE FROM compactions WHERE session_rowid = {rowid}", (session_id,))


def scrub(db: Database, tables: Sequence[str]) -> bool:
    """``VACUUM`` the tables a forget touched, then rebuild the keyword index, after the commit, on an autocommit
    connection (a transaction block refuses both); True when both ran to their end.

    VACUUM removes the dead rows from the heap and TOAST pages and their entries from the indexes, but a GIN
    index keeps a word as a key once no row holds it any more: ``REINDEX INDEX CONCURRENTLY`` writes it anew
    without them (as FTS5's ``optimize`` on SQLite), while commits and reads go on. It reads the whole table:
    the cost of a forget grows with the store, as on SQLite. A failure is logged, not raised: the forget is
    committed and stands, and autovacuum removes the rows later.
    """
    try:
        with db.writer() as conn:
            conn.execute(f"VACUUM {', '.join(tables)}")
            try:
                conn.execute("REINDEX INDEX CONCURRENTLY messages_search")
            finally:
                _drop_unfinished_rebuilds(conn)
    except psycopg.Error as exc:
        log.warning("the VACUUM or REINDEX after a forget failed; autovacuum will remove the rows later: %s", exc)
        return False
    return True


def _drop_unfinished_rebuilds(conn: Connection) -> None:
    """A REINDEX CONCURRENTLY stopped part way leaves its new index behind, invalid (``messages_search_ccnew``):
    never used by queries, yet written at every commit and holding the words it had read. Drop it."""
    rows = conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = current_schema()"
        " AND c.relname LIKE 'messages\\_search\\_ccnew%' AND NOT i.indisvalid"
    ).fetchall()
    for (name,) in rows:
        conn.execute(sql.SQL("DROP INDEX CONCURRENTLY IF EXISTS {}").format(sql.Identifier(str(name))))


def rewrite_archives(conn: Connection, archive_dir: Path) -> int:
    """Rewrite every archive holding a tombstoned message without its line (atomically, 0600); returns how many."""
    return rewrite_archive_files(archive_dir, lambda raws: _tombstoned(conn, raws))


def _tombstoned(conn: Connection, raws: list[bytes]) -> set[int]:
    """The positions of the lines a tombstone names, asked in one statement for the whole file."""
    named = list(line_identities(raws))
    if not named:
        return set()
    rows = conn.execute(
        "SELECT i.n FROM unnest(%s::int[], %s::text[], %s::bytea[]) AS i(n, session_id, content_hash)"
        " WHERE EXISTS (SELECT 1 FROM forgotten f WHERE f.session_id = i.session_id"
        " AND f.content_hash = i.content_hash)",
        ([n for n, _, _ in named], [s for _, s, _ in named], [d for _, _, d in named]),
    )
    return {int(row[0]) for row in rows}


def run(
    db: Database, index: ForgettingIndex | None, archive_dir: Path, selector: Selector, *, dry_run: bool
) -> Forgotten:
    """Plan, then (unless ``dry_run``) forget exactly what the plan shows; the view lists every message."""
    if dry_run:
        return plan(db.reader(), archive_dir, selector).view(dry_run=True, full_text=selector.match is not None)
    with archive.store_lock(db, wait=True):  # no sidecar archives what this plans, until it is gone (``archive.py``)
        found = plan(db.reader(), archive_dir, selector)
        view = found.view(dry_run=False, full_text=selector.match is not None)
        removed, rewritten, vacuumed = forget(db, index, archive_dir, found)
    return replace(view, removed=removed, archive_files_rewritten=rewritten, wal_truncated=vacuumed)
