"""Stored text rewritten in place (``redact --rescan``) on PostgreSQL: ``store/sqlite/rewrite.py``'s calls.

A message's text lives in more places than its row, as on SQLite, but fewer of them need telling here: its
keyword entry (``messages.search``) is recomputed by the server from the new text in the same ``UPDATE`` (a
trigger; a generated column before m009), and its GIN index entries follow the row. Its vector and the cached
embedding of its old text are derived from that text, so both go and the message is queued to be embedded
again; the days it names are read again from the new text.

An ``UPDATE`` leaves the old row version (old text, old keyword entry) in the table, invisible to every
query, until ``VACUUM`` removes it and its index entries, and the GIN index keeps the old words themselves
until it is rebuilt: ``optimize_fts`` does both, on a connection outside any transaction
(``Database.writer()``), since PostgreSQL refuses them inside one.
"""

from __future__ import annotations

from psycopg import pq

from openclaw_lossless.capture.grams import gram_text
from openclaw_lossless.store.model.rewrite import cache_key
from openclaw_lossless.store.postgres import forgetting, message_days
from openclaw_lossless.store.postgres.connection import Connection
from openclaw_lossless.store.postgres.messages import pg_text
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.rewrite import Pages, Row

_PAGES = Pages(POSTGRES)  # the rescan's pages and the snapshot rename: the same statements on both backends
identity_taken = _PAGES.identity_taken
compaction_page = _PAGES.compaction_page
link_page = _PAGES.link_page
snapshot_page = _PAGES.snapshot_page
rename_snapshot = _PAGES.rename_snapshot

# The tables ``redact --rescan`` rewrites rows of, or deletes rows from, for its rewrites.
REWRITTEN_TABLES = (
    "messages",
    "message_days",
    "message_vectors",
    "embedding_cache",
    "embedding_backlog",
    "compactions",
    "subagent_links",
    "snapshots",
)


def message_page(conn: Connection, after: int, limit: int) -> list[Row]:
    """``(id, session_rowid, kind, text, original, content_hash, date_terms)`` of the messages after ``after``."""
    rows = conn.execute(
        "SELECT id, session_rowid, kind, text, original, content_hash, date_terms FROM messages"
        " WHERE id > %s ORDER BY id LIMIT %s",
        (after, limit),
    ).fetchall()
    return [(*row[:5], bytes(row[5]), row[6]) for row in rows]


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
    """Store a message's new text, original and identity; a changed text is indexed, embedded and dated anew.

    ``date_terms`` is unused here: SQLite needs it to take the old entry out of FTS5; the keyword entry here
    is recomputed from the row, whose date words stay (they come from when it was written, not its text).
    """
    stored = pg_text(text)
    row = conn.execute(
        "UPDATE messages SET text = %s, original = %s, content_hash = %s, grams = %s WHERE id = %s"
        " RETURNING role, created_at",
        (stored, original, content_hash, gram_text(stored), message_id),
    ).fetchone()
    if row is None or stored == old_text:
        return
    _drop_vector(conn, message_id, old_text)
    conn.execute("DELETE FROM message_days WHERE message_id = %s", (message_id,))
    message_days.index(conn, message_id, str(row[0]), stored, float(row[1]))


def set_compaction_text(conn: Connection, compaction_id: int, summary: str | None, reason: str | None) -> None:
    conn.execute(
        "UPDATE compactions SET summary = %s, reason = %s WHERE id = %s",
        (_pg_optional(summary), _pg_optional(reason), compaction_id),
    )


def set_link_reason(conn: Connection, link_id: int, reason: str | None) -> None:
    conn.execute("UPDATE subagent_links SET ended_reason = %s WHERE id = %s", (_pg_optional(reason), link_id))


def optimize_fts(conn: Connection) -> None:
    """Leave no trace of rewritten text in the keyword index or the tables: ``VACUUM`` the tables a rescan
    rewrote (the old row versions, which still hold the replaced text, go with their index entries), then
    rebuild the keyword index (a GIN index keeps every word it ever held in its word tree, with an empty
    list of rows once they are vacuumed, until it is rebuilt).

    Both need a connection outside any transaction (``with db.writer() as conn``): PostgreSQL refuses them
    in one, so inside ``Database.write`` this raises rather than leave the old text in place. The rebuild is
    ``CONCURRENTLY``: sidecars keep committing and searching while it runs (3.2 s per 100,000 messages on a
    2-core machine, and the ``VACUUM`` 0.6 s).
    Unlike SQLite's ``secure_delete``, ``VACUUM`` does not promise to zero the space it frees: bytes of a
    removed row may stay in a data file's free space until a new row overwrites them, and the server's WAL,
    replicas and backups keep what they hold.
    """
    if conn.info.transaction_status != pq.TransactionStatus.IDLE or not conn.autocommit:
        raise RuntimeError(
            "optimize_fts runs VACUUM and REINDEX, which PostgreSQL refuses in a transaction: use Database.writer()"
        )
    conn.execute("VACUUM (ANALYZE) " + ", ".join(REWRITTEN_TABLES))
    try:
        conn.execute("REINDEX INDEX CONCURRENTLY messages_search")
    finally:  # a rebuild stopped part way leaves an invalid copy holding the words it read (forgetting.py says more)
        forgetting._drop_unfinished_rebuilds(conn)


def _pg_optional(text: str | None) -> str | None:
    return None if text is None else pg_text(text)


def _drop_vector(conn: Connection, message_id: int, old_text: str) -> None:
    """The message's vector and the cached embedding of its old text go; it is queued to be embedded again."""
    conn.execute("DELETE FROM message_vectors WHERE message_id = %s", (message_id,))
    conn.execute("DELETE FROM embedding_cache WHERE text_hash = %s", (cache_key(old_text),))
    conn.execute("INSERT INTO embedding_backlog (message_id) VALUES (%s) ON CONFLICT DO NOTHING", (message_id,))
