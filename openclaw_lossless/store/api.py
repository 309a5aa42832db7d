"""The store's interface: every operation the rest of the package performs on the store, grouped by domain.

Why: several sidecars sharing one memory need a server (PostgreSQL + pgvector), one person on a laptop needs
nothing to run (SQLite + FTS5 + sqlite-vec), and the rest of the package must not care which. These protocols
name each call the sidecar, recall, the embedding worker, history import, archive, forget, transfer, doctor and
the CLI make, and their docstrings state what both backends must keep. ``store/sqlite/`` and
``store/postgres/`` each have a module per protocol (what both run alike, the timeline's whole, is kept once
in ``store/statements/``);
``store/backend.py`` gathers them into a ``Backend`` (one field per protocol) and callers reach them through
``Store.ops``. ``tests/test_store_api.py`` and ``tests/postgres/backend/test_api.py`` also check each call's
parameters at run time.

Shape: every protocol is generic in the backend's connection handle ``C`` (a ``sqlite3.Connection`` here, a
``psycopg.Connection`` there) and, where a call runs its own transactions, its ``Database`` type ``D``. A
call that takes ``conn`` runs inside the caller's unit of work: ``db.write(lambda conn: ...)`` for writes
(all or nothing), ``db.reader()`` for reads (a consistent snapshot of committed data per statement on both
backends; recall on one sidecar sees every sidecar's commits). A call that takes ``db`` runs several
transactions of its own (archive, forget, import, migrate), each one all or nothing.

Not here, because they hold no SQL and are shared by both backends: ``sessions.agent_of``,
``sessions.check_identifier``, ``sessions.DEFAULT_AGENT``, ``messages.turn_identities``, the ``Scope``,
``SessionRef`` and other dataclasses, ``snapshots.check_name`` and its statuses, ``transfer.write_jsonl``
and the line parser ``transfer/lines.py``. They live in the SQLite modules, the first backend, and the
PostgreSQL modules import them from there; ``Scope.sql`` renders SQLite SQL, and the PostgreSQL modules
render a scope themselves.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord
from openclaw_lossless.store.model.archive import Pruned, WouldPrune
from openclaw_lossless.store.model.counts import StoreCounts
from openclaw_lossless.store.model.forgetting import ForgettingIndex, Forgotten, Selector
from openclaw_lossless.store.model.memory_files import MemoryFile, StoredChunk
from openclaw_lossless.store.model.messages import Around, CommitStatus, MessageView, Neighbour, StoredMessage
from openclaw_lossless.store.model.sessions import Scope, SessionRef
from openclaw_lossless.store.model.snapshots import (
    Compaction,
    CompactionListed,
    CompactionPoint,
    CompactionRecord,
    Snapshot,
)
from openclaw_lossless.store.model.timelines import SessionSummary, Timeline, Window
from openclaw_lossless.store.model.transfer.export import ExportScope
from openclaw_lossless.store.model.transfer.restore import RestoreReport
from openclaw_lossless.store.model.vectors import StoredVectors
from openclaw_lossless.store.statements.keyword_pairs import PairsProgress
from openclaw_lossless.timeexpr.days import DayRange

C = TypeVar("C", contravariant=True)  # the backend's connection, as the caller's unit of work hands it over
D = TypeVar("D", contravariant=True)  # the backend's Database, for calls that run their own transactions
C_co = TypeVar("C_co", covariant=True)
T = TypeVar("T")

Row = tuple[Any, ...]
ModelKey = tuple[str, str, str, int]  # (provider, model, variant, dimension) of the embedder


# -- the database: units of work and migrations ---------------------------------------------------------------


class Database(Protocol[C_co]):
    """Where units of work run. SQLite: one writer behind a lock, a reader per thread. PostgreSQL: a pool.

    ``write`` runs ``work`` in one transaction, all or nothing, and returns its result; a failure rolls it
    back and raises a translated error (``LosslessError``: full disk, damaged or unreachable store). Writes
    are serialisable with respect to each other in effect: SQLite has one writer; PostgreSQL must get the
    same outcome with row locks and ``ON CONFLICT`` (never a lost update, never a duplicate advancement key),
    retrying a serialisation failure itself rather than surfacing it to the hook.
    """

    @property
    def path(self) -> Path | None:
        """SQLite: the file. PostgreSQL: None (the store is named by its URL, shown without its password)."""
        ...

    def write(self, work: Callable[[C_co], T]) -> T:
        """Run ``work`` in one write transaction on this store; all or nothing."""
        ...

    def reader(self) -> C_co:
        """A connection for reads, this thread's own (SQLite) or borrowed from the pool (PostgreSQL)."""
        ...

    def translated(self) -> AbstractContextManager[None]:
        """Reads run inside raise the store's errors, never the driver's: the project's (``errors.py``) when
        the cause has a name, else ``StoreError`` (``store/model/store_errors.py``), as ``write`` does."""
        ...

    def writer(self) -> AbstractContextManager[C_co]:
        """The write connection outside a transaction, for maintenance (VACUUM, checkpoint, secure delete)."""
        ...

    def file_bytes(self) -> int:
        """Bytes the store occupies (SQLite: file + WAL; PostgreSQL: its schema's tables, indexes and TOAST)."""
        ...

    def close(self) -> None: ...


class Migrations(Protocol[D]):
    """Schema migrations: ordered named functions, each applied in the transaction that records it."""

    def migrate(self, db: D) -> list[str]:
        """Apply every migration not yet recorded and return the names applied, refusing (``SchemaTooNew``)
        a store that records a migration this version does not know, before writing anything.

        With several sidecars on one database, migrations run once: the first sidecar takes a lock
        (PostgreSQL: ``pg_advisory_lock`` on a fixed key, held on one connection for the whole run while each
        migration commits in its own transaction) and the others wait for it and then find nothing left to
        apply.
        """
        ...


# -- sessions and recall scope -----------------------------------------------------------------------------------


class Sessions(Protocol[C]):
    """Sessions (``sessionId``, new after ``/new``) under their stable ``sessionKey`` and agent.

    A session's row id is its identity inside the store (messages, turns, snapshots point to it); it never
    changes and is never reused. Scope semantics (``recall_scope``) are identical on both backends: a
    subagent sees its own sessions and its parent's history, never a sibling's; a parent never recalls a
    linked subagent's transcript, only the outcome records copied into its own session.
    """

    def ensure_session(self, conn: C, session_id: str, session_key: str | None) -> SessionRef:
        """The session, created on first sight; its key is filled in once known. Concurrent first sights
        of one session on two sidecars yield one row (insert on conflict, then read)."""
        ...

    def find_session(self, conn: C, session_id: str) -> SessionRef | None: ...

    def require_session(self, conn: C, session_id: str) -> SessionRef:
        """The session, or ``NotFound`` naming it."""
        ...

    def latest_session(self, conn: C) -> SessionRef:
        """The most recently seen session (the CLI's default), or ``NotFound`` when there is none."""
        ...

    def session_by_rowid(self, conn: C, rowid: int) -> SessionRef: ...

    def session_ids(self, conn: C) -> dict[int, str]:
        """Every session's ``sessionId`` by row id."""
        ...

    def agent_ids(self, conn: C) -> frozenset[str]: ...

    def parent_key(self, conn: C, session_key: str | None) -> str | None:
        """The parent's session key of a linked subagent, else None."""
        ...

    def recall_scope(self, conn: C, session: SessionRef, mode: str) -> Scope:
        """What ``session`` may recall: ``agent`` (the agent's whole history, minus linked subagents'
        transcripts) or ``session`` (its own sessions), plus its ancestors' sessions for a subagent."""
        ...


# -- messages: the append-only heart ----------------------------------------------------------------------------


class MessageWrites(Protocol[C]):
    """Writes of messages and turns. A message is durable and keyword-searchable when its transaction commits,
    and queued on the embedding backlog in that same transaction; no embedding happens on this path."""

    def commit_turn(
        self, conn: C, session: SessionRef, advancement_key: str, records: Sequence[MessageRecord], *, heartbeat: bool
    ) -> tuple[CommitStatus, list[int]]:
        """Store a turn and its messages once: the advancement key is committed exactly once across every
        sidecar sharing the store. A key already committed (by this or any other sidecar, before or after a
        restart) answers ``duplicate`` and writes nothing. Two sidecars committing one key at the same moment:
        one commits, the other answers ``duplicate`` (PostgreSQL: ``INSERT ... ON CONFLICT (advancement_key)
        DO NOTHING RETURNING id`` waits for the other transaction, then sees its row), never an error.
        Returns the ids of the messages newly stored (a message already held in the session is not again).
        """
        ...

    def insert_records(
        self, conn: C, session: SessionRef, records: Iterable[MessageRecord], *, turn_rowid: int | None = None
    ) -> list[int]:
        """Store the records the session does not hold yet (identity: ``(session, content_hash)``), never one a
        tombstone names (``forget``); returns the new ids, in order, each queued for embedding."""
        ...

    def adopt_committed(self, conn: C, session: SessionRef, undated: MessageRecord, imported: MessageRecord) -> bool:
        """Give an undated committed message the identity of its dated imported copy, so the import stores it
        once; False when no committed copy is still identified by its turn."""
        ...


class MessageReads(Protocol[C]):
    """Reads of stored messages. Ids are stable for ever (citations ``msg:N``), increasing in commit order
    within a backend; a gap is a forgotten or archived message."""

    def fetch(self, conn: C, ids: Sequence[int]) -> dict[int, StoredMessage]:
        """Messages by id; missing ids are absent from the answer, never an error."""
        ...

    def texts(self, conn: C, ids: Sequence[int]) -> dict[int, str]: ...

    def newest_window_keys(self, conn: C, session_rowid: int, limit: int) -> list[tuple[int, str]]:
        """The session's newest ``limit`` messages as (id, window key), newest first."""
        ...

    def neighbours(self, conn: C, anchors: Sequence[tuple[int, int]], radius: int, scope: Scope) -> list[Neighbour]:
        """Up to ``radius`` messages either side of each (anchor id, session) in its session, within ``scope``,
        each anchor's nearest first; an index range per anchor, whatever the history's size."""
        ...

    def recent(self, conn: C, session_rowid: int, last: int, up_to: int | None = None) -> list[MessageView]:
        """The session's last ``last`` messages (with ids up to ``up_to``), oldest first."""
        ...

    def around(self, conn: C, message_id: int, context: int) -> Around | None: ...

    def count(self, conn: C) -> int: ...


class Messages(MessageWrites[C], MessageReads[C], Protocol[C]):
    """``store/sqlite/messages.py``: both halves."""


# -- search lanes: keywords, days --------------------------------------------------------------------------------


class Fulltext(Protocol[C]):
    """The keyword lane's index. SQLite: FTS5 (porter, unicode61, diacritics folded) over text and date terms.
    PostgreSQL: a ``tsvector`` column (``simple``/``english`` config, ``unaccent``) with a GIN index.

    ``expression`` is the restricted form ``recall/search.fts_query`` builds: distinct quoted words joined by
    ``OR`` (nothing else), so a backend parses it into its own query (``to_tsquery('a | b')``). Scores are
    BM25-like, lower is better as FTS5 returns them; recall only compares a message's score with the
    query's best hit, so a backend's scale may differ (``ts_rank_cd`` negated) while the ranking holds.
    """

    def best_matches(self, conn: C, expression: str, after: int, scope: Scope, k: int) -> list[tuple[int, float]]:
        """``(message id, score)`` of the ``k`` best matches in ``scope`` with an id above ``after``, best
        first; the cost is bounded by the postings of the words asked, never the whole history."""
        ...

    def deadline(self, conn: C, at: float) -> AbstractContextManager[None]:
        """Statements on ``conn`` inside give up at ``at`` (``time.monotonic``) with ``TimeoutError``, so a turn's
        keyword lane never outlives its budget (SQLite: a progress handler; PostgreSQL: a statement timeout)."""
        ...

    def rebuild(self, conn: C, batch: int) -> Iterator[int]:
        """Re-derive the whole index from the messages, a batch at a time (yields each batch's count), inside
        one write transaction: readers keep the old index until it commits."""
        ...


class TermStats(Protocol[C]):
    """``term_stats.TermStats``: leaves words too common to rank out of a keyword query (per process cache)."""

    def narrow(self, conn: C, expression: str) -> tuple[str, int]:
        """The expression to run and the id its matches must exceed (0: the whole history), so that at most
        ``2 × limit`` messages are ranked whatever the history's size."""
        ...

    def clear(self) -> None:
        """Forget every count (messages were archived or forgotten: counts went down)."""
        ...


class KeywordPairs(Protocol[C]):
    """The pairs of characters of messages stored before the keyword index held them, added in the background
    (``store/sqlite/keyword_pairs.py``): resumable, a batch per transaction, newest first."""

    def progress(self, conn: C) -> PairsProgress | None:
        """Where the backfill stands; None when no message waits for its pairs."""
        ...

    def step(self, conn: C, batch: int = ...) -> bool:
        """Pair and index one batch of those, moving the cursor past it in the same transaction; False when
        none is left. Done twice, a message still has one index entry."""
        ...


class MessageDays(Protocol[C]):
    """The days each message refers to, read at capture in the commit's transaction (``timeexpr``)."""

    def of(self, conn: C, ids: Sequence[int]) -> dict[int, list[DayRange]]: ...

    def backfill_pending(self, conn: C) -> bool:
        """Whether messages stored before the days were kept still wait to be read."""
        ...

    def backfill_step(self, conn: C, batch: int = ...) -> bool:
        """Read one batch of those, newest first; False when none is left. Idempotent: two sidecars doing it
        at once read a batch twice at worst, never store a day twice."""
        ...

    def read_again(self, conn: C) -> None:
        """Queue every message to be read again (salvage)."""
        ...

    def read_again_in_new_languages(self, conn: C) -> bool:
        """Queue every message to be read again when the date reader knows languages the stored days were not
        read in (an upgrade); whether it did."""
        ...


# -- vectors and the embedding backlog ---------------------------------------------------------------------------


class Vectors(Protocol[C]):
    """The stored message vectors. SQLite: a sqlite-vec ``vec0`` table of int8 codes with a per-vector scale,
    searched through the in-memory index (``embed/index.py``) loaded from it. PostgreSQL: a ``halfvec(N)``
    column with an IVFFlat index (cosine), searched in the database with the agent's scope as a filter, so a
    vector written by one sidecar is found by every other at once. A vector exists only while its message
    does: a forgotten or archived message loses its vector in the same transaction.
    """

    def exists(self, conn: C) -> bool: ...

    def recreate(self, conn: C, dimension: int) -> None:
        """Drop every vector and make the table for ``dimension`` (the provider changed)."""
        ...

    def write(
        self,
        conn: C,
        ids: Sequence[int],
        codes: npt.NDArray[np.int8],
        scales: npt.NDArray[np.float32],
        sessions: Sequence[int],
    ) -> None:
        """Store the messages' vectors, replacing any older one; a message no longer stored gets none."""
        ...

    def id_range(self, conn: C) -> tuple[int, int] | None: ...

    def read_all(self, conn: C, dimension: int) -> Iterator[StoredVectors]:
        """Every vector, in blocks (what the in-memory index loads at start)."""
        ...

    def queue_missing(self, conn: C) -> int:
        """Queue every message without a vector for embedding; returns how many."""
        ...

    def unaccounted(self, conn: C) -> tuple[int, int]:
        """(messages with neither a vector nor a place on the backlog, vectors of no message): doctor's 0, 0."""
        ...

    def in_current_format(self, conn: C) -> bool: ...


class Backlog(Protocol[C]):
    """The embedding backlog (messages waiting for a vector) and the cache of vectors by text and model.

    Shared without double work: with several sidecars draining one backlog, a message is embedded by one of
    them. ``oldest`` therefore hands out work, not just rows: on PostgreSQL it claims the rows it returns for
    a lease (``UPDATE ... WHERE message_id IN (SELECT ... FOR UPDATE SKIP LOCKED)`` setting a claim time),
    so another sidecar skips them until the lease runs out (a sidecar killed mid-batch loses no message: its
    claim expires and another takes the rows). ``remove`` ends the claim with the vectors' write.
    """

    def size(self, conn: C) -> int: ...

    def queue_all(self, conn: C) -> int:
        """Queue every stored message (``reindex --vectors``); returns how many were not queued already."""
        ...

    def oldest(self, conn: C, limit: int) -> list[tuple[int, str | None, str | None, int | None]]:
        """Up to ``limit`` queued messages, oldest first, as (id, text, agent, session row); text None: the
        message is gone and the entry is to be dropped."""
        ...

    def remove(self, conn: C, message_ids: Sequence[int]) -> None: ...

    def cached_vectors(self, conn: C, model: ModelKey, text_hashes: Sequence[bytes]) -> list[tuple[bytes, bytes]]:
        """``(text hash, vector bytes)`` the model already made for these texts."""
        ...

    def cache_vectors(self, conn: C, model: ModelKey, vectors: Iterable[tuple[bytes, bytes]]) -> None:
        """Keep vectors by text and model; a text already cached keeps its vector (insert, ignore conflicts)."""
        ...


class Meta(Protocol[C]):
    """Small named values the store keeps about itself (the embedder's identity, cursors, markers)."""

    def get(self, conn: C, key: str) -> str | None: ...

    def put(self, conn: C, key: str, value: str) -> None: ...

    def remove(self, conn: C, key: str) -> None: ...

    def hold(self, conn: C, key: str) -> None:
        """Hold ``key`` until the caller's write transaction ends, so reading it and writing what follows
        from it (the embedder's identity, then a new vector table) is one step for every sidecar on the store.
        SQLite's one write transaction at a time already holds everything."""
        ...


# -- compactions, snapshots, subagents ---------------------------------------------------------------------------


class Snapshots(Protocol[C]):
    """Compactions and snapshots: named pointers into a session's history, never destructive."""

    def record_compaction(self, conn: C, session: SessionRef, record: CompactionRecord) -> Compaction:
        """Record the host's compaction with its status; one that compacted gets a ``pre-compaction-N``
        snapshot of the session's last message, in the same transaction."""
        ...

    def create_snapshot(
        self, conn: C, session: SessionRef, name: str, *, automatic: bool = False, compaction_id: int | None = None
    ) -> int | None:
        """Name the session's last message (returned). A name is taken once, for ever (``InvalidName``), also
        when two sidecars take it at once (the unique name decides)."""
        ...

    def list_snapshots(self, conn: C) -> list[Snapshot]: ...

    def find_snapshot(self, conn: C, name: str) -> Snapshot | None: ...

    def find_compaction(self, conn: C, compaction_id: int) -> CompactionPoint | None: ...

    def list_compactions(self, conn: C, limit: int, status: str | None = ...) -> list[CompactionListed]:
        """The ``limit`` latest compactions (of one status, or all), newest first, with their snapshots."""
        ...

    def compaction_counts(self, conn: C) -> dict[str, int]:
        """Compactions by status (``/stats``)."""
        ...


class Subagents(Protocol[C]):
    """Subagent links by session key, and the outcome a finished child hands to its parent."""

    def link(self, conn: C, parent_key: str, child_key: str, context_mode: str | None) -> int:
        """Register the child's session linked to its parent; returns the spawn id a rollback names."""
        ...

    def unlink(self, conn: C, spawn_id: int | None, child_key: str | None) -> bool:
        """Undo a spawn that has not ended (its link, and its session while unused)."""
        ...

    def end(self, conn: C, child_key: str, reason: str) -> tuple[bool, int]:
        """Mark the child ended and copy its final answer and must-remember messages into the parent's latest
        session as outcome records citing them, once (a second end copies nothing new); (linked, copied)."""
        ...


class Timelines(Protocol[C]):
    """A session drawn as a line for the web UI: one page of its messages and the events between them
    (compactions, snapshots, spawns, resets). A page costs what the page holds, never the whole history."""

    def session_summaries(self, conn: C, agent: str | None, limit: int) -> list[SessionSummary]: ...

    def read_timeline(self, conn: C, session: SessionRef, window: Window) -> Timeline: ...


# -- what history import and catch-up ask ------------------------------------------------------------------------


class TranscriptLedger(Protocol[C]):
    """The store's side of reading the host's transcripts back: what a session already holds."""

    def held_session_ids(self, conn: C) -> frozenset[str]: ...

    def first_contact(self, conn: C) -> dict[str, float]: ...

    def holds_content(self, conn: C, session_rowid: int, content_hash: bytes) -> bool: ...

    def newest_time(self, conn: C, session_rowid: int, among: int = ...) -> float | None: ...

    def keys_and_times(self, conn: C, session_rowid: int) -> list[tuple[str, float]]: ...

    def with_window_keys(self, conn: C, session_rowid: int, keys: Iterable[str]) -> list[tuple[bytes, str, str]]: ...

    def mark_all(self, conn: C, keys: Iterable[str]) -> None: ...

    def keys_under(self, conn: C, prefix: str) -> list[str]: ...

    def live_compaction(self, conn: C, session_rowid: int, record: CompactionRecord) -> int | None: ...

    def claim_compaction(
        self, conn: C, session: SessionRef, record: CompactionRecord, imported_reason: str
    ) -> Compaction | None:
        """The live hook takes over a compaction the import recorded (once: the claim marks it)."""
        ...


# -- status ------------------------------------------------------------------------------------------------------


class Counts(Protocol[C]):
    """What the store holds, counted, and whether it answers (``/stats``, ``/healthz``)."""

    def count_rows(self, conn: C) -> StoreCounts: ...

    def any_archived(self, conn: C) -> bool: ...

    def probe(self, conn: C) -> None:
        """Raise (translated) unless the store answers a read now."""
        ...

    def vector_extension(self, conn: C) -> str:
        """The vector extension and its version, as ``/healthz`` names it: ``sqlite-vec v0.1.6`` as loaded,
        or ``pgvector 0.8.1`` from the database's ``pg_extension``."""
        ...


class Agents(Protocol[C]):
    """Per agent: its last commit, its sessions, its messages (``/v1/agents/{id}/status``, activity)."""

    def last_commits(self, conn: C) -> dict[str, float]: ...

    def session_count(self, conn: C, agent_id: str) -> int: ...

    def message_count(self, conn: C, agent_id: str) -> int: ...

    def agents_by_session(self, conn: C) -> dict[int, str]: ...


# -- workspace memory files --------------------------------------------------------------------------------------


class MemoryFiles(Protocol[C, D]):
    """The agents' workspace memory files (``memory_files/``): a row per file indexed, and its chunks stored as
    messages of kind ``memory`` in the agent's ``memory-files:<agentId>`` session, whose window key is the
    chunk's citation (``file:MEMORY.md#L3-7``). A chunk replaced by an edit, or of a deleted file, is removed
    by forget's deletion without a tombstone, and ``scrub`` leaves no byte of it, as after a forget."""

    def files(self, conn: C) -> list[MemoryFile]: ...

    def record_file(self, conn: C, file: MemoryFile) -> None: ...

    def drop_file(self, conn: C, agent_id: str, path: str) -> None: ...

    def sessions(self, conn: C) -> dict[str, int]:
        """Agent id -> the row id of its memory-file session, for the agents that have one."""
        ...

    def stored_chunks(self, conn: C, session_rowid: int) -> list[StoredChunk]: ...

    def mark_chunks(self, conn: C, ids: Sequence[int]) -> None:
        """Make messages just stored (``insert_records``) memory chunks, in the same transaction."""
        ...

    def remove_chunks(self, conn: C, ids: Sequence[int]) -> int: ...

    def scrub(self, db: D) -> bool:
        """After a commit that removed chunks: forget's scrubbing (SQLite: the WAL emptied; PostgreSQL: VACUUM)."""
        ...


# -- archive, forget, transfer: operations that run their own transactions ---------------------------------------


class Archive(Protocol[C, D]):
    """Keeps the store under ``maxDbSizeMb``: the oldest messages are written to a gzip JSONL archive (fsynced)
    and only then removed, vectors and backlog entries with them. With several sidecars, one archives at a
    time (PostgreSQL: a session-level advisory lock; a sidecar that cannot take it skips this round) and
    every archive file is written where the sidecar that wrote it keeps its state."""

    def prune(
        self,
        db: D,
        archive_dir: Path,
        limit_mb: float,
        *,
        dry_run: bool = False,
        progress: Callable[[int], object] | None = None,
    ) -> Pruned | WouldPrune: ...

    def used_bytes(self, conn: C) -> int:
        """Bytes holding data now (freed space excluded, so a deletion shows at once)."""
        ...


class Forgetting(Protocol[C, D]):
    """Forgetting on request, for good: tombstones keep a forgotten message from ever being stored again,
    whichever way it comes back (a replayed turn, an import, another sidecar's catch-up)."""

    def run(
        self, db: D, index: ForgettingIndex | None, archive_dir: Path, selector: Selector, *, dry_run: bool
    ) -> Forgotten:
        """Plan, then (unless ``dry_run``) remove exactly what the plan shows in one write transaction:
        messages, vectors, backlog entries, outcome records citing them, summaries of whole sessions; freed
        content is zeroed (SQLite ``secure_delete``; PostgreSQL: ``VACUUM`` of the touched tables)."""
        ...

    def forgotten_count(self, conn: C) -> int: ...

    def resurrected(self, conn: C) -> int:
        """Stored messages a tombstone names (doctor: must be 0)."""
        ...

    def zero_old_free_space(self, db: D) -> None:
        """Once per store written before freed bytes were always zeroed, leave no old byte in free space
        (SQLite: one ``VACUUM``; PostgreSQL: nothing, its ``VACUUM`` runs where text is removed)."""
        ...


class Transfer(Protocol[C, D]):
    """Export and import as JSONL lines (messages first, then the records that point into them)."""

    def check_scope(self, conn: C, scope: ExportScope) -> None:
        """``NotFound`` for an agent or session the store does not hold."""
        ...

    def export_store(self, conn: C, scope: ExportScope) -> Iterator[dict[str, Any]]:
        """The scope's lines in id order, tombstones included; the same lines from either backend."""
        ...

    def restore_jsonl(
        self, db: D, path: Path, options: CaptureOptions, progress: Callable[[int], object] | None = None
    ) -> RestoreReport:
        """Import a file as untrusted input: every line checked first, ids kept when free and remapped when
        taken; importing a file twice stores nothing the second time."""
        ...

    def write_jsonl(self, records: Iterable[dict[str, Any]], out: Any) -> Counter[str]: ...

    def highest_id_given(self, conn: C) -> int:
        """The highest message id the store has given, stored or not: a forgotten newest message's counts."""
        ...

    def give_ids_above(self, conn: C, highest: int) -> None:
        """In a write: every message stored from now on gets an id above ``highest``, so a copy never gives
        again a citation its source gave (``store/copy.py``)."""
        ...


# -- maintenance: rescan, doctor, file hygiene -------------------------------------------------------------------


class Rewrite(Protocol[C]):
    """``redact --rescan``: pages of stored text by id after a cursor, and the rows rewritten in place (with
    their keyword index entries, vectors, cached embeddings and days re-derived)."""

    def message_page(self, conn: C, after: int, limit: int) -> list[Row]: ...

    def identity_taken(self, conn: C, session_rowid: int, content_hash: bytes) -> bool: ...

    def rewrite_message(
        self,
        conn: C,
        message_id: int,
        *,
        old_text: str,
        date_terms: str | None,
        text: str,
        original: str,
        content_hash: bytes,
    ) -> None: ...

    def compaction_page(self, conn: C, after: int, limit: int) -> list[Row]: ...

    def set_compaction_text(self, conn: C, compaction_id: int, summary: str | None, reason: str | None) -> None: ...

    def link_page(self, conn: C, after: int, limit: int) -> list[Row]: ...

    def set_link_reason(self, conn: C, link_id: int, reason: str | None) -> None: ...

    def snapshot_page(self, conn: C, after: int, limit: int) -> list[Row]: ...

    def rename_snapshot(self, conn: C, snapshot_id: int, name: str) -> None: ...

    def optimize_fts(self, conn: C) -> None:
        """Compact the keyword index so replaced text leaves no trace in it (PostgreSQL: ``VACUUM``)."""
        ...


class Checks(Protocol[C]):
    """Read-only checks for ``doctor``, safe on a damaged store or one written by a newer version."""

    def library_versions(self) -> tuple[str, str]: ...

    def has_table(self, conn: C, name: str) -> bool: ...

    def applied_migrations(self, conn: C) -> set[str] | None: ...

    def integrity_problems(self, conn: C, limit: int = ...) -> list[str]:
        """SQLite: ``PRAGMA integrity_check``. PostgreSQL: ``amcheck`` on the store's indexes."""
        ...

    def fts_problem(self, conn: C) -> str | None: ...


class FileMaintenance(Protocol[D]):
    """SQLite-only today (``connection.py``): the WAL and freed pages. PostgreSQL's own processes do this
    (checkpointer, autovacuum), so its backend answers these as no-ops."""

    def checkpoint_fully(self, db: D) -> None: ...

    def set_secure_delete(self, db: D, on: bool) -> bool: ...


class Rebuild(Protocol[C, D]):
    """SQLite-only: ``salvage`` writes the rows it read from a damaged file's pages into a fresh store. It stays
    with the SQLite backend (a PostgreSQL store is repaired with PostgreSQL's own tools)."""

    def table_columns(self, conn: C, table: str) -> list[Row]: ...

    def allow_dangling_references(self, db: D) -> None: ...

    def insert_rows(self, conn: C, table: str, names: Sequence[str], rows: list[list[Any]]) -> None: ...

    def add_placeholder_sessions(self, conn: C) -> int: ...
