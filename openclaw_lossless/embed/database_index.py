"""The vector index of a PostgreSQL store: ``VectorIndex``'s calls, answered by the database.

Why not ``VectorIndex`` (``embed/index.py``): it is a copy of the vectors in this process's memory, loaded at
start and appended to by this process's embedding worker. Several sidecars share a PostgreSQL store, and each
would miss the vectors the others write until it restarted. ``DatabaseIndex`` keeps nothing: every search and
every vector read goes to the store (``store/postgres/vectors.py``: IVFFlat over ``halfvec`` with the scope as
a filter), so a vector is found by every sidecar as soon as the transaction that wrote it commits, and a
forgotten message's vector is gone for all of them with its row.

Same calls, same answers: ``search``/``search_many`` give the ``k`` nearest messages in scope, each with its
cosine to every query computed as ``VectorIndex`` does (the query's dot product with the stored vector),
ordered by the first query's; ``vector``/``vectors`` give stored vectors. What ``VectorIndex`` needs only
because it is a copy (``load``, ``add``, ``forget_ids``, ``forget_through``) does nothing here, and says why.

One thing the store cannot do for itself is decide when its index should be made (again): the lists of an
IVFFlat index are learnt from the vectors there are. So ``load`` (at start) and ``add`` (after the worker's
writes, at most every ``UPKEEP_S``) ask ``vectors.keep_index`` in a thread of their own, which makes the
index when it is due, one sidecar at a time; neither the turn nor the worker waits for it. ``close`` (the
sidecar's) cancels a build under way and waits for the thread: a build takes minutes of the server at 1M, and
a cancelled one is left for the next start, which finds the index still due and makes it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import psycopg

from openclaw_lossless.embed.index import LATER_SHORTLIST
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.store.backend import Backend
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import vectors as stored
from openclaw_lossless.store.postgres.connection import Connection, Database

log = logging.getLogger(__name__)
UPKEEP_S = 60.0  # the least time between two checks of whether the index is due (one count of the vectors)
RETRY_AFTER_FAILURE_S = 1800.0  # after a build failed (the server short of memory): a build reads every vector
# A scope found larger than ``vectors.EXACT_ROWS`` is taken as large for this long without counting again
# (the count reads up to 20,001 index entries a search: docs/decisions/0002). Only archiving or forgetting makes a
# scope smaller, and a search of a scope taken as large while it is not is still answered, ranked whole when
# the lists hold fewer than ``k`` of it: it can cost time for a minute, never a result.
LARGE_SCOPE_TTL_S = 60.0
LARGE_SCOPES_KEPT = 1024  # scopes remembered at most (a sidecar serves a few agents and subagents)
STOP_WAIT_S = 10.0  # close() waits this long at most for the upkeep thread once its build is cancelled


class DatabaseIndex:
    """``VectorIndex``'s interface over a PostgreSQL store: searches and reads in the database, nothing held."""

    def __init__(self, db: Database, dimension: int) -> None:
        self.db = db
        self.dimension = dimension
        self.loaded = threading.Event()  # nothing to load: ready at once, so recall never waits on keywords alone
        self.loaded.set()
        self.searches_while_loading = 0  # always 0: there is no loading to search through
        self._upkeep_lock = threading.Lock()
        self._upkeep: threading.Thread | None = None
        self._building: Connection | None = None  # the upkeep's build connection while it is open
        self._closing = False
        self._next_check = 0.0  # monotonic
        self._large_until: dict[Scope, float] = {}  # monotonic: until when a scope is taken as large

    def __len__(self) -> int:
        """Vectors stored (every sidecar's): one count on the server, for the status page."""
        return stored.count(self.db.reader())

    def estimated_len(self) -> int:
        """Vectors stored, the server's estimate beyond ``COUNTED_EXACTLY``: what a poll of ``/healthz`` costs."""
        return stored.estimated_count(self.db.reader())

    @property
    def nbytes(self) -> int:
        """Memory this index holds in the process: none (the vectors stay in the database)."""
        return 0

    def load(self, ops: Backend, conn: Any, stop: threading.Event | None = None) -> None:
        """Nothing to read: the store answers each search. Whether its index is due is checked (a store moved
        here by ``migrate-store`` or import holds vectors and no index yet)."""
        self.loaded.set()
        self.keep_index(force=True)

    def add(self, ids: Sequence[int], vectors: Vectors, agents: Sequence[str], sessions: Sequence[int]) -> None:
        """The worker's transaction stored these vectors (``store_vectors``), which every search sees once it
        commits; the table has grown, so whether its index is due is checked (at most every ``UPKEEP_S``)."""
        self.keep_index()

    def keep_index(self, force: bool = False) -> threading.Thread | None:
        """Check in the background whether the store's index is due, and make it if so; returns the thread
        started (None when one is running, or the last check was less than ``UPKEEP_S`` ago, or a build failed
        less than ``RETRY_AFTER_FAILURE_S`` ago: each try reads every vector)."""
        with self._upkeep_lock:
            now = time.monotonic()
            running = self._upkeep is not None and self._upkeep.is_alive()
            if self._closing or running or (not force and now < self._next_check):
                return None
            self._next_check = now + UPKEEP_S
            self._upkeep = threading.Thread(target=self._keep_index, name="lossless-vector-lists", daemon=True)
            self._upkeep.start()
            return self._upkeep

    def close(self) -> bool:
        """Stop the upkeep: no check starts from now on, a build under way is cancelled on the server, and the
        thread is waited for (up to ``STOP_WAIT_S``); whether it has ended. The sidecar closes the store after."""
        with self._upkeep_lock:
            self._closing = True
            building, thread = self._building, self._upkeep
        if building is not None:
            with contextlib.suppress(psycopg.Error):  # the build may have just ended and closed its connection
                building.cancel_safe(timeout=STOP_WAIT_S)
        if thread is not None:
            thread.join(STOP_WAIT_S)
        return thread is None or not thread.is_alive()

    def _keep_index(self) -> None:
        began = time.monotonic()
        try:
            if stored.keep_index(self.db, building=self._hold):
                log.info("the vector index was made in %.1f s", time.monotonic() - began)
        except Exception:  # the thread's edge: searches go on (through the old index, or the table)
            if self._closing:
                log.info("the vector index being made was left at shutdown; the next start makes it")
                return
            with self._upkeep_lock:
                self._next_check = time.monotonic() + RETRY_AFTER_FAILURE_S
            log.exception("the vector index could not be made; tried again in %.0f minutes", RETRY_AFTER_FAILURE_S / 60)

    def _hold(self, conn: Connection | None) -> None:
        """Keep the build's connection for ``close`` to cancel; once closing, no build starts."""
        with self._upkeep_lock:
            if conn is not None and self._closing:
                raise InterruptedError("the sidecar is closing")
            self._building = conn

    def forget_ids(self, ids: Sequence[int]) -> None:
        """Nothing to do: forgetting a message deletes its vector in the same transaction (foreign key)."""

    def forget_through(self, last_id: int) -> None:
        """Nothing to do: archiving deletes the messages' vectors with them (foreign key)."""

    def vector(self, message_id: int) -> Vectors | None:
        """The message's stored vector, None when it has none (not embedded yet, forgotten, archived)."""
        ids, rows = self.vectors([message_id])
        return rows[0] if ids else None

    def vectors(self, message_ids: Sequence[int]) -> tuple[list[int], Vectors]:
        """The stored vectors of those of ``message_ids`` that hold one: (their ids, the rows), one read."""
        none: Vectors = np.zeros((0, self.dimension), dtype=np.float32)
        if not message_ids:
            return [], none
        ids, rows = stored.embeddings(self.db.reader(), message_ids)
        # None of them holds one yet (all still on the backlog): no rows, but rows of this index's width, which
        # the caller multiplies by the query's vectors (a (0, 0) array made every such assemble a 500)
        return (ids, rows) if ids else ([], none)

    def search(self, query: Vectors, scope: Scope, k: int) -> list[tuple[int, float]]:
        """The ``k`` most cosine-similar messages in ``scope``, best first."""
        found = self.search_many(np.asarray(query, dtype=np.float32).reshape(1, -1), scope, k)
        return [(ident, float(cosines[0])) for ident, cosines in found]

    def search_many(self, queries: Vectors, scope: Scope, k: int) -> list[tuple[int, Vectors]]:
        """The ``k`` nearest messages in ``scope`` of each query (a row), each with its cosine to every query,
        ordered by the first query's cosine, best first (``VectorIndex.search_many``'s answer). The queries
        after the first search less of the store, by the same share as ``VectorIndex``'s (``LATER_SHORTLIST``)."""
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dimension)
        if k <= 0 or not len(queries):
            return []
        conn = self.db.reader()
        small = self._is_small(conn, scope)
        found = stored.nearest_many(conn, queries, scope, k, later_share=LATER_SHORTLIST, small=small)
        rows: dict[int, Vectors] = {}
        for ids, vectors in found:
            rows.update(zip(ids, vectors, strict=True))
        if not rows:
            return []
        ids = list(rows)
        cosines = np.stack([rows[i] for i in ids]) @ queries.T
        order = np.argsort(-cosines[:, 0], kind="stable")
        return [(ids[i], cosines[i]) for i in order]

    def _is_small(self, conn: Connection, scope: Scope) -> bool:
        """``vectors.scope_is_small``, not counted again for ``LARGE_SCOPE_TTL_S`` once a scope was large."""
        now = time.monotonic()
        if self._large_until.get(scope, 0.0) > now:
            return False
        small = stored.scope_is_small(conn, scope)
        if not small:
            if len(self._large_until) >= LARGE_SCOPES_KEPT:
                self._large_until.clear()
            self._large_until[scope] = now + LARGE_SCOPE_TTL_S
        return small
