"""Message vectors: int8 codes persisted in a sqlite-vec table, searched from compact in-memory arrays.

SQLite is the source of truth: ``message_vectors`` (``store/sqlite/vectors.py``, a ``vec0`` table any SQLite shell
with sqlite-vec can search) holds each message's int8 codes and scale (``quantize.py`` says why int8 keeps
the ranking) and its session. The in-memory ``VectorIndex`` is a cache of that table, loaded at start and
appended to by the backlog worker after each committed batch.

Why not search with sqlite-vec itself: its KNN scans every vector exactly, 20 to 40 times as long as this
index on the same vectors (``benchmarks/vec_knn.py``, 100k and 1M), too slow for a turn. Here a search scans sign
bits (48 bytes a vector) for a shortlist and ranks it exactly with the int8 codes: ~440 bytes a vector in RAM.

``meta`` records the provider identity the vectors were built with. When the configured provider differs
(another model, variant or dimension), the old vectors are dropped and every message goes back on the
backlog: vectors of two models are never mixed, and recall falls back to keyword search until rebuilt.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any, Protocol, TypeVar, cast

import numpy as np
import numpy.typing as npt

from openclaw_lossless.embed.provider import ProviderIdentity, Vectors
from openclaw_lossless.store import quantize
from openclaw_lossless.store.backend import Backend, Store
from openclaw_lossless.store.model.sessions import Scope

IDENTITY_KEY = "embedding.identity"
FORMAT_KEY = "embedding.format"
FORMAT = "vec0-int8-v1"  # what migration m009 writes: int8 codes in a sqlite-vec ``vec0`` table
DEFAULT_SHORTLIST = 10000
# The shortlist is also at least this share of the vectors in scope. The true neighbours' rank by sign bits
# grows with the collection, so a fixed shortlist keeps fewer of them as the history grows; a constant share
# keeps the overlap level, at a cost that grows like the bit scan's own (docs/decisions/0008).
SHORTLIST_SHARE = 0.04
LATER_SHORTLIST = 0.25  # the shortlist of a search's second query, as a share of the first's (``search_many``)
_CHUNK = 65536  # rows per step of the bit scan: keeps its temporaries in cache
_RESCORE_BLOCK = 2048  # shortlist rows converted to float32 at a time: 3 MB, in cache
_FAR = np.uint16(65535)  # the distance given to vectors out of scope
Grown = TypeVar("Grown", bound=np.ndarray[Any, Any])


def prepare_table(store: Store, identity: ProviderIdentity) -> bool:
    """Make the vector table match ``identity``; returns True when existing vectors had to be dropped."""
    return bool(store.db.write(lambda conn: _prepare(store.ops, conn, identity)))


def _prepare(ops: Backend, conn: Any, identity: ProviderIdentity) -> bool:
    """Keep the vectors when ``identity`` built them; otherwise start an empty table and queue every message.

    The table itself comes from migration m009 (with the recorded provider's dimension); only a change of
    provider, or a first provider, recreates it here, at the new provider's dimension.
    """
    ops.meta.hold(conn, IDENTITY_KEY)  # sidecars starting together on one store: one prepares, the rest see it
    recorded = ops.meta.get(conn, IDENTITY_KEY)
    wanted = json.dumps(asdict(identity), sort_keys=True)
    same_model = recorded == wanted
    if same_model and ops.vectors.exists(conn):
        return False
    ops.vectors.recreate(conn, identity.dimension)
    ops.backlog.queue_all(conn)
    ops.meta.put(conn, IDENTITY_KEY, wanted)
    ops.meta.put(conn, FORMAT_KEY, FORMAT)
    return recorded is not None and not same_model


def recorded_identity(ops: Backend, conn: Any) -> ProviderIdentity | None:
    recorded = ops.meta.get(conn, IDENTITY_KEY)
    return None if recorded is None else ProviderIdentity(**json.loads(recorded))


def store_vectors(ops: Backend, conn: Any, ids: Sequence[int], vectors: Vectors, sessions: Sequence[int]) -> None:
    """Persist vectors as int8 codes and take their messages off the backlog (inside the caller's transaction)."""
    codes, scales = quantize.quantize(vectors)
    ops.vectors.write(conn, ids, codes, scales, sessions)  # not for a message forgotten while it was being embedded
    ops.backlog.remove(conn, ids)


class Nearest(Protocol):
    """What recall, the worker, forgetting and the status page ask of a vector index, whichever holds it:
    ``VectorIndex`` (a copy in this process, for SQLite) or ``DatabaseIndex`` (the PostgreSQL store itself)."""

    dimension: int
    loaded: threading.Event
    searches_while_loading: int

    def __len__(self) -> int: ...

    def estimated_len(self) -> int:
        """``len``, or an estimate where counting costs the store a scan (for ``/healthz`` and metrics)."""
        ...

    @property
    def nbytes(self) -> int: ...

    def load(self, ops: Backend, conn: Any, stop: threading.Event | None = None) -> None: ...

    def add(self, ids: Sequence[int], vectors: Vectors, agents: Sequence[str], sessions: Sequence[int]) -> None: ...

    def forget_ids(self, ids: Sequence[int]) -> None: ...

    def forget_through(self, last_id: int) -> None: ...

    def vector(self, message_id: int) -> Vectors | None: ...

    def vectors(self, message_ids: Sequence[int]) -> tuple[list[int], Vectors]: ...

    def search(self, query: Vectors, scope: Scope, k: int) -> list[tuple[int, float]]: ...

    def search_many(self, queries: Vectors, scope: Scope, k: int) -> list[tuple[int, Vectors]]: ...

    def close(self) -> bool: ...


class VectorIndex:
    """The in-memory copy of ``message_vectors``: codes, sign bits, and each row's agent and session.

    Until ``load`` has finished, searches answer nothing (recall runs on keyword search alone) and are
    counted, so a large store can be served while its vectors are still being read.
    """

    def __init__(self, dimension: int, shortlist: int = DEFAULT_SHORTLIST, share: float = SHORTLIST_SHARE) -> None:
        self.dimension = dimension
        self.shortlist = shortlist
        self.share = share
        self.loaded = threading.Event()
        self.searches_while_loading = 0
        self._lock = threading.Lock()
        self._size = 0
        self._dead = 0  # slots of forgotten or archived messages: kept, never matched, not counted
        self._words = quantize.bit_words(dimension)
        self._ids = np.zeros(0, dtype=np.int64)
        self._codes = np.zeros((0, dimension), dtype=np.int8)
        self._scales = np.zeros(0, dtype=np.float32)
        self._bits = np.zeros((self._words, 0), dtype=np.uint64)  # one row per word: each scanned contiguously
        self._agents = np.zeros(0, dtype=np.int32)
        self._sessions = np.zeros(0, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)  # message id -> slot, -1 when absent (ids are dense)
        self._agent_codes: dict[str, int] = {}

    def __len__(self) -> int:
        """The vectors it holds: a forgotten or archived message's slot stays but is not counted."""
        return self._size - self._dead

    def estimated_len(self) -> int:
        """Exact: the count is held in memory."""
        return len(self)

    @property
    def nbytes(self) -> int:
        """Memory its arrays hold (their capacity, grown ahead of use): what the index costs the process."""
        arrays = (self._ids, self._codes, self._scales, self._bits, self._agents, self._sessions, self._slots)
        return sum(array.nbytes for array in arrays)

    def load(self, ops: Backend, conn: Any, stop: threading.Event | None = None) -> None:
        """Read every stored vector (at start, possibly in a thread of its own), then mark the index loaded;
        once ``stop`` is set it returns at the next block, unloaded (the sidecar is closing)."""
        agents = ops.agents.agents_by_session(conn)
        span = ops.vectors.id_range(conn)
        if span is not None:
            self._reserve(span[1] - span[0] + 1, span[1])
        for block in ops.vectors.read_all(conn, self.dimension):
            if stop is not None and stop.is_set():
                return
            if not len(block.ids):
                continue
            sessions = block.sessions.tolist()
            self._append(block.ids, block.codes, block.scales, [agents.get(s, "") for s in sessions], sessions)
        self.loaded.set()

    def add(self, ids: Sequence[int], vectors: Vectors, agents: Sequence[str], sessions: Sequence[int]) -> None:
        codes, scales = quantize.quantize(vectors)
        self._append(np.asarray(ids, dtype=np.int64), codes, scales, agents, sessions)

    def _append(
        self,
        ids: npt.NDArray[np.int64],
        codes: quantize.Codes,
        scales: quantize.Scales,
        agents: Sequence[str],
        sessions: Sequence[int],
    ) -> None:
        with self._lock:
            self._reserve(self._size + len(ids), int(ids.max()) if len(ids) else 0)
            known = self._slots[ids] >= 0
            _, first = np.unique(ids, return_index=True)
            fresh = np.zeros(len(ids), dtype=bool)
            fresh[first] = True
            fresh &= ~known
            count = int(fresh.sum())
            start, end = self._size, self._size + count
            self._ids[start:end] = ids[fresh]
            self._codes[start:end] = codes[fresh]
            self._scales[start:end] = scales[fresh]
            self._bits[:, start:end] = quantize.sign_bits(codes[fresh]).T
            agent_codes = [self._agent_codes.setdefault(a, len(self._agent_codes)) for a in agents]
            self._agents[start:end] = np.asarray(agent_codes, dtype=np.int32)[fresh]
            self._sessions[start:end] = np.asarray(sessions, dtype=np.int64)[fresh]
            self._slots[ids[fresh]] = np.arange(start, end, dtype=np.int32)
            self._size = end

    def _reserve(self, rows: int, max_id: int) -> None:
        """Grow the arrays by a quarter at a time: a doubling would briefly hold twice the index in RAM."""
        if max_id >= len(self._slots):
            grown = np.full(max(max_id + 1, len(self._slots) * 5 // 4, 1024), -1, dtype=np.int32)
            grown[: len(self._slots)] = self._slots
            self._slots = grown
        capacity = len(self._ids)
        if rows <= capacity:
            return
        capacity = max(rows, capacity * 5 // 4, 1024)
        n = self._size
        self._ids = _resized(self._ids, capacity, n)
        self._codes = _resized(self._codes, capacity, n)
        self._scales = _resized(self._scales, capacity, n)
        self._agents = _resized(self._agents, capacity, n)
        self._sessions = _resized(self._sessions, capacity, n)
        bits = np.zeros((self._words, capacity), dtype=np.uint64)
        bits[:, :n] = self._bits[:, :n]
        self._bits = bits

    def close(self) -> bool:
        """Nothing runs on its own here (``load`` runs in the sidecar's thread, which the sidecar waits for)."""
        return True

    def forget_through(self, last_id: int) -> None:
        """Forget every message up to ``last_id`` (archived): their slots stay but can match no scope."""
        with self._lock:
            gone = self._ids[: self._size] <= last_id
            self._dead += int((gone & (self._agents[: self._size] >= 0)).sum())
            self._agents[: self._size][gone] = -1
            self._sessions[: self._size][gone] = -1
            self._slots[self._ids[: self._size][gone]] = -1

    def forget_ids(self, ids: Sequence[int]) -> None:
        """Forget these messages (``store/sqlite/forgetting.py``): codes zeroed, slots matching no scope."""
        with self._lock:
            known = sorted({int(i) for i in ids if 0 <= int(i) < len(self._slots) and self._slots[int(i)] >= 0})
            slots = self._slots[known]
            self._dead += int((self._agents[slots] >= 0).sum())
            self._codes[slots] = 0
            self._scales[slots] = 0.0
            self._bits[:, slots] = 0
            self._agents[slots] = -1
            self._sessions[slots] = -1
            self._slots[known] = -1

    def vector(self, message_id: int) -> Vectors | None:
        if not self.loaded.is_set() or not 0 <= message_id < len(self._slots):
            return None
        slot = int(self._slots[message_id])
        if slot < 0:
            return None
        vector: Vectors = quantize.dequantize(self._codes[slot : slot + 1], self._scales[slot : slot + 1])[0]
        return vector

    def vectors(self, message_ids: Sequence[int]) -> tuple[list[int], Vectors]:
        """The vectors of those of ``message_ids`` the index holds, dequantized at once: (their ids, the rows).

        For the keyword lane's hits the vector lane did not reach: one gather and one multiply for all of
        them, not a ``vector`` call each (docs/decisions/0008).
        """
        if not self.loaded.is_set() or not message_ids:
            return [], np.zeros((0, self.dimension), dtype=np.float32)
        slots_of = self._slots  # read before the codes: a slot it names is in any codes array read after it
        ids = np.asarray(message_ids, dtype=np.int64)
        ids = ids[(ids >= 0) & (ids < len(slots_of))]
        slots = slots_of[ids]
        present = slots >= 0
        ids, slots = ids[present], slots[present]
        return [int(i) for i in ids], quantize.dequantize(self._codes[slots], self._scales[slots])

    def search(self, query: Vectors, scope: Scope, k: int) -> list[tuple[int, float]]:
        """The ``k`` most cosine-similar messages in ``scope``, best first (none while still loading)."""
        found = self.search_many(np.asarray(query, dtype=np.float32).reshape(1, -1), scope, k)
        return [(ident, float(scores[0])) for ident, scores in found]

    def search_many(self, queries: Vectors, scope: Scope, k: int) -> list[tuple[int, Vectors]]:
        """The ``k`` nearest messages in ``scope`` of each query (one per row), each with its cosine to every query.

        For the few queries of one turn (assemble asks with the prompt in context and with the prompt alone):
        the scope mask is built once, each query ranks its own shortlist, and only the rows kept are scored
        against the other queries. The queries after the first rank a shortlist a quarter the size
        (``LATER_SHORTLIST``): assemble takes only the prompt's few best from its own ranking, and ranking the
        int8 codes is most of a search's cost (docs/decisions/0008). Ordered by the first query's cosine, best
        first; none while loading.
        """
        if not self.loaded.is_set():
            self.searches_while_loading += 1
            return []
        with self._lock:
            n = self._size
            ids, codes, scales = self._ids[:n], self._codes[:n], self._scales[:n]
            bits, agents, sessions = self._bits[:, :n], self._agents[:n], self._sessions[:n]
            wanted = [self._agent_codes[a] for a in scope.agent_ids if a in self._agent_codes]
        if n == 0 or k <= 0 or len(queries) == 0:
            return []
        mask = _scope_mask(agents, sessions, wanted, scope)
        queries = np.asarray(queries, dtype=np.float32).reshape(-1, self.dimension)
        kept: list[npt.NDArray[np.intp]] = []
        for number, query in enumerate(queries):
            size = max(self.shortlist, k) if number == 0 else max(int(self.shortlist * LATER_SHORTLIST), k)
            candidates = self._shortlist(query, bits, mask, size, self.share * (1 if number == 0 else LATER_SHORTLIST))
            scores = _rescore(codes, candidates, query) * scales[candidates]
            top = _top_k(scores, k)
            if len(queries) == 1:
                return [(int(ids[candidates[i]]), scores[i : i + 1]) for i in top]
            kept.append(candidates[top])
        slots = np.unique(np.concatenate(kept))
        # einsum, not BLAS, as in ``_rescore``: a few hundred rows, and a threaded BLAS call stalls on busy cores
        cosines = np.einsum("ij,kj->ik", codes[slots].astype(np.float32), queries) * scales[slots, None]
        order = np.argsort(-cosines[:, 0], kind="stable")
        return [(int(ids[slots[i]]), cosines[i]) for i in order]

    def _shortlist(
        self, query: Vectors, bits: quantize.Bits, mask: npt.NDArray[np.bool_], size: int, share: float
    ) -> npt.NDArray[np.intp]:
        """Slots of the ``size`` (or a few more, on ties) in-scope vectors nearest to ``query`` by sign bits.

        ``size`` grows to ``share`` of the vectors in scope when that is more (see ``SHORTLIST_SHARE``).
        """
        in_scope = int(mask.sum())
        size = max(size, math.ceil(in_scope * share))
        if in_scope <= size:
            return np.flatnonzero(mask)
        query_codes, _ = quantize.quantize(query.reshape(1, -1))
        query_bits = quantize.sign_bits(query_codes)[0]
        distance = _hamming(bits, query_bits)
        distance[~mask] = _FAR
        cumulative = np.cumsum(np.bincount(distance, minlength=self._words * 64 + 1)[: self._words * 64 + 1])
        threshold = int(np.searchsorted(cumulative, size))
        chosen = np.flatnonzero(distance <= threshold)
        if len(chosen) > 2 * size:  # a crowded threshold: keep the nearest ``size`` of them
            chosen = chosen[np.argpartition(distance[chosen], size)[:size]]
        return chosen


def _rescore(codes: quantize.Codes, candidates: npt.NDArray[np.intp], query: Vectors) -> Vectors:
    """The query's dot product with each candidate's int8 codes (unscaled).

    In blocks of ``_RESCORE_BLOCK`` rows: converting a whole 1M-message shortlist to float32 at once wrote a
    large temporary and read it back, which cost more than the arithmetic; a block stays in cache
    (docs/decisions/0008). einsum, not BLAS: a threaded BLAS call stalls when
    the cores are busy, for no gain at this size.
    """
    out = np.empty(len(candidates), dtype=np.float32)
    for start in range(0, len(candidates), _RESCORE_BLOCK):
        block = codes[candidates[start : start + _RESCORE_BLOCK]].astype(np.float32)
        out[start : start + len(block)] = np.einsum("ij,j->i", block, query)
    return out


def _hamming(bits: quantize.Bits, query_bits: quantize.Bits) -> npt.NDArray[np.uint16]:
    """Hamming distance of every row to the query, scanned in cache-sized chunks with no big temporaries."""
    n = bits.shape[1]
    distance = np.empty(n, dtype=np.uint16)
    xor = np.empty(_CHUNK, dtype=np.uint64)
    ones = np.empty(_CHUNK, dtype=np.uint8)
    for start in range(0, n, _CHUNK):
        end = min(n, start + _CHUNK)
        out, x, c = distance[start:end], xor[: end - start], ones[: end - start]
        for word in range(bits.shape[0]):
            np.bitwise_xor(bits[word, start:end], query_bits[word], out=x)
            np.bitwise_count(x, out=c)
            if word == 0:
                out[:] = c
            else:
                np.add(out, c, out=out)
    return distance


def _scope_mask(
    agents: npt.NDArray[np.int32], sessions: npt.NDArray[np.int64], codes: list[int], scope: Scope
) -> npt.NDArray[np.bool_]:
    """The rows in ``scope``, as ``Scope.contains`` decides: the agents' rows but excluded sessions', plus extras."""
    mask: npt.NDArray[np.bool_]
    if len(codes) == 1:
        mask = np.equal(agents, codes[0])
    else:
        mask = np.isin(agents, codes) if codes else np.zeros(len(agents), dtype=bool)
    if scope.excluded:
        mask &= ~np.isin(sessions, list(scope.excluded))
    if scope.session_rowids:
        mask |= np.isin(sessions, list(scope.session_rowids))
    return mask


def _resized(array: Grown, capacity: int, used: int) -> Grown:
    grown = np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
    grown[:used] = array[:used]
    return cast(Grown, grown)


def _top_k(scores: npt.NDArray[np.float32], k: int) -> npt.NDArray[np.intp]:
    if k >= len(scores):
        return np.argsort(-scores)
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part])]
