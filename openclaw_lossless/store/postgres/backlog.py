"""The embedding backlog and cache on PostgreSQL: one backlog drained by every sidecar, without double work.

Handing out work is a claim, not a read: ``claim`` marks the rows it returns as this worker's until a lease
ends (``claimed_by``, ``claimed_until`` on the server's clock, so the sidecars' clocks need not agree), and
picks them with ``FOR UPDATE SKIP LOCKED``: rows another worker's claim is locking right now are passed over
rather than waited for, and a row whose claim committed meanwhile is re-checked and left out. Two workers
therefore never hold the same row. ``remove`` (in the transaction storing the vectors) ends a claim with its
row; a worker killed mid-batch stores nothing and removes nothing, and once its lease ends another takes the
rows. A message is embedded twice at worst (a batch outliving its lease), never lost.

``oldest`` is the SQLite module's call (``store/sqlite/backlog.py``) with this process as the worker and the
default lease, so the embedding worker can call either backend alike.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Iterable, Sequence

from openclaw_lossless.store.postgres.connection import Connection

ModelKey = tuple[str, str, str, int]  # (provider, model, variant, dimension)
Queued = tuple[int, str | None, str | None, int | None]  # (id, text, agent, session row); text None: gone

# A batch takes seconds even on a busy CPU, and every batch stored renews the worker's other claims (``remove``),
# so a live worker keeps its window; a killed one's rows are free again this soon (it was 300 s, which left a
# killed sidecar's window out of vector recall for five minutes while the others sat idle).
LEASE_S = 30.0
WORKER = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"  # this process, on any host


def size(conn: Connection) -> int:
    """Messages waiting to be embedded (claimed or not)."""
    row = conn.execute("SELECT count(*) FROM embedding_backlog").fetchone()
    return 0 if row is None else int(row[0])


def queue_all(conn: Connection) -> int:
    """Queue every stored message (``reindex --vectors``); returns how many were not queued already."""
    cursor = conn.execute("INSERT INTO embedding_backlog (message_id) SELECT id FROM messages ON CONFLICT DO NOTHING")
    return max(cursor.rowcount, 0)


def claim(conn: Connection, limit: int, *, worker: str, lease_s: float, own_again: bool = False) -> list[Queued]:
    """Claim up to ``limit`` of the oldest unclaimed (or expired) entries for ``worker`` for ``lease_s``
    seconds; returns them oldest first. Run it in a write transaction: the claim holds once that commits.

    ``own_again``: the entries ``worker`` holds already are handed out again too (``oldest``)."""
    rows = conn.execute(
        "WITH picked AS (SELECT message_id FROM embedding_backlog"
        " WHERE claimed_until IS NULL OR claimed_until <= now() OR (%s AND claimed_by = %s)"
        " ORDER BY message_id LIMIT %s FOR UPDATE SKIP LOCKED),"
        " claimed AS (UPDATE embedding_backlog b SET claimed_by = %s,"
        " claimed_until = now() + make_interval(secs => %s)"
        " FROM picked WHERE b.message_id = picked.message_id RETURNING b.message_id)"
        " SELECT c.message_id, m.text, m.agent_id, m.session_rowid FROM claimed c"
        " LEFT JOIN messages m ON m.id = c.message_id ORDER BY c.message_id",
        (own_again, worker, limit, worker, lease_s),
    )
    return [(int(r[0]), r[1], r[2], None if r[3] is None else int(r[3])) for r in rows]


def oldest(conn: Connection, limit: int) -> list[Queued]:
    """The ``limit`` oldest entries no other worker holds, claimed for this process (``claim``).

    Entries this process claimed before are among them, as on SQLite, where the backlog is read again: the
    embedding worker asks only once it has handed out every batch it read, so an entry it still holds is one
    whose batch failed (the provider refused, a thread raised) or that another of its drain threads is still
    embedding (embedded twice then, as on SQLite). Waiting out the lease instead left a failed batch's messages
    without vectors for five minutes while the rest of the backlog drained."""
    return claim(conn, limit, worker=WORKER, lease_s=LEASE_S, own_again=True)


def remove(conn: Connection, message_ids: Sequence[int]) -> None:
    """Take messages off the backlog (their vectors are stored), ending their claims, and renew this worker's
    claims on the rest of its window: a worker that stores batches is alive, so its lease can stay short."""
    conn.execute("DELETE FROM embedding_backlog WHERE message_id = ANY(%s::bigint[])", ([int(i) for i in message_ids],))
    conn.execute(
        "UPDATE embedding_backlog SET claimed_until = now() + make_interval(secs => %s)"
        " WHERE claimed_by = %s AND claimed_until > now()",
        (LEASE_S, WORKER),
    )


def cached_vectors(conn: Connection, model: ModelKey, text_hashes: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
    """``(text hash, vector bytes)`` the model already made for these texts (the caller checks each size)."""
    if not text_hashes:
        return []
    rows = conn.execute(
        "SELECT text_hash, vector FROM embedding_cache WHERE provider = %s AND model = %s AND variant = %s"
        " AND dimension = %s AND text_hash = ANY(%s::bytea[])",
        (*model, list(text_hashes)),
    )
    return [(bytes(row[0]), bytes(row[1])) for row in rows]


def cache_vectors(conn: Connection, model: ModelKey, vectors: Iterable[tuple[bytes, bytes]]) -> None:
    """Keep ``(text hash, vector bytes)`` for the model; a text already cached keeps its vector."""
    with conn.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO embedding_cache (provider, model, variant, dimension, text_hash, vector)"
            " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(*model, digest, vector) for digest, vector in vectors],
        )
