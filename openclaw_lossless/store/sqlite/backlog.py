"""The embedding backlog (messages waiting for a vector) and the embedding cache (vectors by text and model).

Every committed message is queued here in its turn's transaction (``messages.queue_for_embedding``) and the
background worker (``embed/worker.py``) drains it; the cache keeps each text's vector per model, so a text
embedded once (a repeated prompt, a message re-queued by ``reindex``) is not embedded again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from openclaw_lossless.store.sqlite.connection import Connection

# (provider, model, variant, dimension): the embedder a cached vector came from
ModelKey = tuple[str, str, str, int]


def size(conn: Connection) -> int:
    """Messages waiting to be embedded."""
    return int(conn.execute("SELECT count(*) FROM embedding_backlog").fetchone()[0])


def queue_all(conn: Connection) -> int:
    """Queue every stored message (``reindex --vectors``); returns how many were not queued already."""
    return int(conn.execute("INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT id FROM messages").rowcount)


def oldest(conn: Connection, limit: int) -> list[tuple[int, str | None, str | None, int | None]]:
    """The ``limit`` oldest queued messages as (id, text, agent, session row); text None: no longer stored."""
    return [
        (int(r[0]), r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT b.message_id, m.text, m.agent_id, m.session_rowid FROM embedding_backlog b"
            " LEFT JOIN messages m ON m.id = b.message_id ORDER BY b.message_id LIMIT ?",
            (limit,),
        )
    ]


def remove(conn: Connection, message_ids: Sequence[int]) -> None:
    """Take messages off the backlog (their vectors are stored)."""
    conn.executemany("DELETE FROM embedding_backlog WHERE message_id = ?", [(int(i),) for i in message_ids])


def cached_vectors(conn: Connection, model: ModelKey, text_hashes: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
    """``(text hash, vector bytes)`` the model already made for these texts (the caller checks each size)."""
    if not text_hashes:
        return []
    marks = ",".join("?" * len(text_hashes))
    rows = conn.execute(
        "SELECT text_hash, vector FROM embedding_cache WHERE provider = ? AND model = ? AND variant = ?"
        f" AND dimension = ? AND text_hash IN ({marks})",
        [*model, *text_hashes],
    )
    return [(bytes(row[0]), bytes(row[1])) for row in rows]


def cache_vectors(conn: Connection, model: ModelKey, vectors: Iterable[tuple[bytes, bytes]]) -> None:
    """Keep ``(text hash, vector bytes)`` for the model; a text already cached keeps its vector."""
    conn.executemany(
        "INSERT OR IGNORE INTO embedding_cache (provider, model, variant, dimension, text_hash, vector)"
        " VALUES (?, ?, ?, ?, ?, ?)",
        [(*model, digest, vector) for digest, vector in vectors],
    )
