"""Stored text rewritten in place (``redact --rescan``): the pages of rows it reads and the updates it makes.

The rescan (``rescan.py``) decides what the current rules change; this module owns how each table is read a
page at a time (by id, after a cursor) and how a changed row is written back. A message's text lives in three
more places than its row: the external-content FTS index (FTS5 must be told exactly what it held to take it
out), its vector and cached embedding (both derived from the old text, so they go and the message is queued
to be embedded again) and the days it names (read again from the new text).
"""

from __future__ import annotations

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.model.rewrite import cache_key
from openclaw_lossless.store.sqlite import message_days, vectors
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.rewrite import Pages, Row

_PAGES = Pages(SQLITE)  # the rescan's pages and the snapshot rename: the same statements on both backends
identity_taken = _PAGES.identity_taken
compaction_page = _PAGES.compaction_page
link_page = _PAGES.link_page
snapshot_page = _PAGES.snapshot_page
rename_snapshot = _PAGES.rename_snapshot


def message_page(conn: Connection, after: int, limit: int) -> list[Row]:
    """``(id, session_rowid, kind, text, original, content_hash, date_terms)`` of the messages after ``after``."""
    return [
        tuple(row)
        for row in conn.execute(
            "SELECT id, session_rowid, kind, text, original, content_hash, date_terms FROM messages"
            " WHERE id > ? ORDER BY id LIMIT ?",
            (after, limit),
        ).fetchall()
    ]


def rewrite_message(
    conn: Connection,
    message_id: int,
    *,
    old_text: str,
    date_terms: str | None,
    text: str,
    original: str,
    content_hash: bytes,
) -> None:
    """Store a message's new text, original and identity; a changed text is indexed, embedded and dated anew."""
    text_changed = text != old_text
    if text_changed:
        _fts_delete(conn, message_id, old_text, date_terms)
    grams = gram_text(text)
    conn.execute(
        "UPDATE messages SET text = ?, original = ?, content_hash = ?, grams = ? WHERE id = ?",
        (text, original, content_hash, grams, message_id),
    )
    if text_changed:
        conn.execute(
            "INSERT INTO messages_fts(rowid, text, date_terms, grams) VALUES (?, ?, ?, ?)",
            (message_id, text, date_terms, grams),
        )
        _drop_vector(conn, message_id, old_text)
        message_days.read_anew(conn, message_id)


def set_compaction_text(conn: Connection, compaction_id: int, summary: str | None, reason: str | None) -> None:
    conn.execute("UPDATE compactions SET summary = ?, reason = ? WHERE id = ?", (summary, reason, compaction_id))


def set_link_reason(conn: Connection, link_id: int, reason: str | None) -> None:
    conn.execute("UPDATE subagent_links SET ended_reason = ? WHERE id = ?", (reason, link_id))


def optimize_fts(conn: Connection) -> None:
    """Merge the FTS index's segments, so the ones that held rewritten text are gone (zeroed by secure_delete)."""
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")


def _fts_delete(conn: Connection, message_id: int, text: str, date_terms: str | None) -> None:
    """Take a message out of the external-content FTS index: FTS5 needs the exact values it indexed."""
    grams = conn.execute("SELECT grams FROM messages WHERE id = ?", (message_id,)).fetchone()
    conn.execute(
        "INSERT INTO messages_fts(messages_fts, rowid, text, date_terms, grams) VALUES ('delete', ?, ?, ?, ?)",
        (message_id, text, date_terms, None if grams is None else grams[0]),
    )


def _drop_vector(conn: Connection, message_id: int, old_text: str) -> None:
    """The message's vector and the cached embedding of its old text go; it is queued to be embedded again."""
    vectors.delete(conn, [message_id])
    conn.execute("DELETE FROM embedding_cache WHERE text_hash = ?", (cache_key(old_text),))
    conn.execute("INSERT OR IGNORE INTO embedding_backlog (message_id) VALUES (?)", (message_id,))
