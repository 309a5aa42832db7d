"""Rebuilding the derived indexes from the messages, which are the source of truth.

The full-text index is rebuilt in one statement. Vectors are rebuilt through the embedding backlog: the
messages are queued, then embedded batch by batch, each batch committed on its own. That makes a vector
rebuild resumable: interrupted, it leaves a shorter backlog, and the next run (or the running sidecar's
worker) carries on from there.
"""

from __future__ import annotations

from typing import IO, Any

from tqdm import tqdm

from openclaw_lossless.embed.worker import backlog_size
from openclaw_lossless.errors import EmbeddingUnavailable
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.connection import Connection, Database


def rebuild_fts(db: Database) -> int:
    def work(conn: Connection) -> int:
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
        return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])

    return db.write(work)


def rebuild_vectors(sidecar: Sidecar, *, missing_only: bool, drain: bool, progress_file: IO[str]) -> dict[str, Any]:
    """Queue messages for embedding; with ``drain``, embed them here (the sidecar is not running)."""
    queued = sidecar.db.write(lambda conn: _queue(conn, missing_only))
    if not drain:
        return {"queued": queued, "embeddedBy": "the running sidecar"}
    if sidecar.worker is None:
        raise EmbeddingUnavailable(f"no embedder: {sidecar.embedding.status.reason}; run 'openclaw-lossless doctor'")
    remaining = backlog_size(sidecar.db.reader())
    embedded = 0
    with tqdm(total=remaining, desc="embed", unit="msg", disable=None, file=progress_file) as bar:
        while done := sidecar.worker.drain_once():
            embedded += done
            bar.update(done)
    return {"queued": queued, "embedded": embedded}


def _queue(conn: Connection, missing_only: bool) -> int:
    has_vectors = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'message_vectors'").fetchone()
    if missing_only and has_vectors:
        cursor = conn.execute(
            "INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT id FROM messages m"
            " WHERE NOT EXISTS (SELECT 1 FROM message_vectors v WHERE v.message_id = m.id)"
        )
    else:
        cursor = conn.execute("INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT id FROM messages")
    return int(cursor.rowcount)
