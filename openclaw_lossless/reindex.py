"""Rebuilding the derived indexes from the messages, which are the source of truth.

The full-text index is rebuilt in one transaction, batch by batch so a bar can show how far it is: readers
keep the old index until it commits, and an interrupted rebuild leaves the old one as it was. Vectors are
rebuilt through the embedding backlog: the messages are queued, then embedded batch by batch, each batch
committed on its own. That makes a vector rebuild resumable: interrupted, it leaves a shorter backlog, and
the next run (or the running sidecar's worker) carries on from there.
"""

from __future__ import annotations

from typing import IO, Any

from tqdm import tqdm

from openclaw_lossless.errors import EmbeddingUnavailable
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import Backend, Store

FTS_BATCH = 5000


def rebuild_fts(store: Store, progress_file: IO[str] | None = None) -> int:
    """Rebuild the full-text index from the messages (what FTS5's 'rebuild' does, in batches); returns the count."""

    def work(conn: Any) -> int:
        total = store.ops.messages.count(conn)
        with tqdm(total=total, desc="full-text index", unit="msg", disable=None, file=progress_file) as bar:
            for added in store.ops.fulltext.rebuild(conn, FTS_BATCH):
                bar.update(added)
        return total

    return store.db.write(work)


def rebuild_vectors(sidecar: Sidecar, *, missing_only: bool, drain: bool, progress_file: IO[str]) -> dict[str, Any]:
    """Queue messages for embedding; with ``drain``, embed them here (the sidecar is not running)."""
    store, worker = sidecar.store, sidecar.worker
    queued = store.db.write(lambda conn: _queue(store.ops, conn, missing_only))
    if not drain:
        return {"queued": queued, "embeddedBy": "the running sidecar"}
    if worker is None:
        embedding = sidecar.embedding
        raise EmbeddingUnavailable(f"no embedder: {embedding.status.reason}; run 'openclaw-lossless doctor'")
    remaining = store.ops.backlog.size(store.db.reader())
    embedded = 0
    with tqdm(total=remaining, desc="embed", unit="msg", disable=None, file=progress_file) as bar:
        while done := worker.drain_once():
            embedded += done
            bar.update(done)
    return {"queued": queued, "embedded": embedded}


def _queue(ops: Backend, conn: Any, missing_only: bool) -> int:
    if missing_only and ops.vectors.exists(conn):
        return ops.vectors.queue_missing(conn)
    return ops.backlog.queue_all(conn)
