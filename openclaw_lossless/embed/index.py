"""Message vectors: persisted in a sqlite-vec table, searched from an in-memory matrix kept in step.

SQLite is the source of truth (``message_vectors``, a ``vec0`` table); the matrix is a cache loaded at start
and appended to by the backlog worker after each committed batch. Why not search ``vec0`` directly: a
full scan costs ~0.7 µs per vector there versus ~0.07 µs for a matrix product in RAM.

``meta`` records the provider identity the vectors were built with. When the configured provider differs
(another model, variant or dimension), the old vectors are dropped and every message goes back on the
backlog: vectors of two models are never mixed, and recall falls back to keyword search until rebuilt.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import asdict

import numpy as np
import numpy.typing as npt

from openclaw_lossless.embed.provider import ProviderIdentity, Vectors
from openclaw_lossless.store.connection import Connection, Database
from openclaw_lossless.store.sessions import Scope

IDENTITY_KEY = "embedding.identity"
TABLE = "message_vectors"


def prepare_table(db: Database, identity: ProviderIdentity) -> bool:
    """Make the vector table match ``identity``; returns True when existing vectors had to be dropped."""
    return db.write(lambda conn: _prepare(conn, identity))


def _prepare(conn: Connection, identity: ProviderIdentity) -> bool:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (IDENTITY_KEY,)).fetchone()
    wanted = json.dumps(asdict(identity), sort_keys=True)
    if row is not None and row[0] == wanted:
        return False
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(
        f"CREATE VIRTUAL TABLE {TABLE} USING vec0("
        f"message_id INTEGER PRIMARY KEY, embedding float[{identity.dimension}] distance_metric=cosine)"
    )
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (IDENTITY_KEY, wanted))
    conn.execute("INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT id FROM messages")
    return row is not None


def recorded_identity(conn: Connection) -> ProviderIdentity | None:
    row = conn.execute("SELECT value FROM meta WHERE key = ?", (IDENTITY_KEY,)).fetchone()
    return None if row is None else ProviderIdentity(**json.loads(row[0]))


def store_vectors(conn: Connection, ids: Sequence[int], vectors: Vectors) -> None:
    """Persist vectors and take their messages off the backlog (inside the caller's transaction)."""
    conn.executemany(
        f"INSERT OR REPLACE INTO {TABLE} (message_id, embedding) VALUES (?, ?)",
        [(int(i), np.ascontiguousarray(v, dtype=np.float32).tobytes()) for i, v in zip(ids, vectors, strict=True)],
    )
    conn.executemany("DELETE FROM embedding_backlog WHERE message_id = ?", [(int(i),) for i in ids])


class VectorIndex:
    """The in-memory copy of ``message_vectors`` with each row's agent and session, for scoped search."""

    def __init__(self, dimension: int) -> None:
        self.dimension = dimension
        self._lock = threading.Lock()
        self._size = 0
        self._ids = np.zeros(0, dtype=np.int64)
        self._vectors = np.zeros((0, dimension), dtype=np.float32)
        self._agents = np.zeros(0, dtype=np.int32)
        self._sessions = np.zeros(0, dtype=np.int64)
        self._agent_codes: dict[str, int] = {}
        self._position: dict[int, int] = {}

    def __len__(self) -> int:
        return self._size

    def load(self, conn: Connection, batch: int = 20000) -> None:
        """Read every stored vector (at start)."""
        cursor = conn.execute(
            f"SELECT v.message_id, v.embedding, m.agent_id, m.session_rowid FROM {TABLE} v"
            " JOIN messages m ON m.id = v.message_id"
        )
        while rows := cursor.fetchmany(batch):
            vectors = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
            self.add([r[0] for r in rows], vectors, [r[2] for r in rows], [r[3] for r in rows])

    def add(self, ids: Sequence[int], vectors: Vectors, agents: Sequence[str], sessions: Sequence[int]) -> None:
        with self._lock:
            fresh = [k for k, i in enumerate(ids) if int(i) not in self._position]
            self._grow(self._size + len(fresh))
            for k in fresh:
                slot = self._size
                self._ids[slot] = ids[k]
                self._vectors[slot] = vectors[k]
                self._agents[slot] = self._agent_codes.setdefault(agents[k], len(self._agent_codes))
                self._sessions[slot] = sessions[k]
                self._position[int(ids[k])] = slot
                self._size += 1

    def forget_through(self, last_id: int) -> None:
        """Forget every message up to ``last_id`` (archived): their slots stay but can match no scope."""
        with self._lock:
            gone = self._ids[: self._size] <= last_id
            self._agents[: self._size][gone] = -1
            self._sessions[: self._size][gone] = -1
            for message_id in self._ids[: self._size][gone]:
                self._position.pop(int(message_id), None)

    def _grow(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        capacity = max(needed, capacity * 2, 1024)
        self._ids = np.resize(self._ids, capacity)
        self._agents = np.resize(self._agents, capacity)
        self._sessions = np.resize(self._sessions, capacity)
        grown = np.zeros((capacity, self.dimension), dtype=np.float32)
        grown[: self._size] = self._vectors[: self._size]
        self._vectors = grown

    def vector(self, message_id: int) -> Vectors | None:
        slot = self._position.get(int(message_id))
        return None if slot is None else self._vectors[slot]

    def search(self, query: Vectors, scope: Scope, k: int) -> list[tuple[int, float]]:
        """The ``k`` most cosine-similar messages in ``scope``, best first."""
        with self._lock:
            n = self._size
            ids, agents, sessions = self._ids[:n], self._agents[:n], self._sessions[:n]
            vectors = self._vectors[:n]
            codes = [self._agent_codes[a] for a in scope.agent_ids if a in self._agent_codes]
        if n == 0 or k <= 0:
            return []
        mask = self._scope_mask(agents, sessions, codes, scope)
        scores = vectors @ query.astype(np.float32)
        scores[~mask] = -np.inf
        top = _top_k(scores, k)
        return [(int(ids[i]), float(scores[i])) for i in top if np.isfinite(scores[i])]

    @staticmethod
    def _scope_mask(
        agents: npt.NDArray[np.int32], sessions: npt.NDArray[np.int64], codes: list[int], scope: Scope
    ) -> npt.NDArray[np.bool_]:
        mask = np.isin(agents, codes) if codes else np.zeros(len(agents), dtype=bool)
        if scope.session_rowids:
            mask |= np.isin(sessions, list(scope.session_rowids))
        return mask


def _top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    if k >= len(scores):
        return np.argsort(-scores)
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]
