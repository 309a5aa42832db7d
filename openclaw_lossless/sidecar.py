"""The sidecar: one object that owns the store, the embedder, the index and the worker for the process.

Routers stay thin by calling these methods; the CLI uses the same object when it works on the database
file directly. Every hook's semantics live here (or below it), in one place.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from openclaw_lossless import __version__
from openclaw_lossless.activity import Activity
from openclaw_lossless.capture.injected import InjectedText
from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, capture
from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.config import RecallOverrides, RecallSettings, Settings
from openclaw_lossless.embed.index import VectorIndex, prepare_table, recorded_identity
from openclaw_lossless.embed.openai_compat import EmbedderStats
from openclaw_lossless.embed.provider import EmbeddingProvider, ProviderIdentity
from openclaw_lossless.embed.service import EmbeddingService, build_provider
from openclaw_lossless.embed.worker import EmbeddingWorker, backlog_size
from openclaw_lossless.errors import BadRequest, LosslessError, NotFound
from openclaw_lossless.history import skipped
from openclaw_lossless.history.catchup import CatchUp
from openclaw_lossless.history.feed import claim_imported
from openclaw_lossless.metrics import Metrics
from openclaw_lossless.recall.assemble import AssembleInput, Assembler, AssembleResult
from openclaw_lossless.recall.window import Descriptor
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store import archive, message_days, messages, snapshots, subagents
from openclaw_lossless.store.connection import Connection, Database, open_connection, sqlite_module, translate_error
from openclaw_lossless.store.migrations import migrate
from openclaw_lossless.store.sessions import (
    Scope,
    SessionRef,
    agent_of,
    check_identifier,
    ensure_session,
    find_session,
    session_by_rowid,
)
from openclaw_lossless.store.term_stats import TermStats

log = logging.getLogger(__name__)

PRUNE_CHECK_EVERY_S = 30.0
PRUNE_CLOSE_WAIT_S = 10.0  # close waits this long at most for a size check (archiving) under way
DAYS_BACKFILL_PAUSE_S = 0.02  # between backfill batches, so turns' writes come first


class Sidecar:
    def __init__(
        self,
        settings: Settings,
        *,
        start_worker: bool = True,
        provider: EmbeddingProvider | None = None,
        background_load: bool = False,
    ) -> None:
        """Open the store; with ``background_load`` (the server) the vector index loads in a thread of its own.

        Why in the background: at a million messages reading the vectors takes seconds, and a turn must not
        wait for them. Until loaded, recall runs on keyword search (``/healthz`` shows ``vectorIndex``); the
        worker starts after the load so no vector can be added to a half-read index.
        """
        self.settings = settings
        self.started = time.monotonic()
        self.metrics = Metrics()
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(settings.state_dir, 0o700)  # the token, archives and (by default) the database live here
        self.db = Database(settings.database_path, synchronous=settings.synchronous)
        try:
            migrate(self.db)
        except LosslessError:
            self.db.close()
            raise
        self.activity = Activity.from_store(self.db.reader())  # per agent: last commit, assemble and recall
        self.selection = SessionSelection.of(settings.include_sessions, settings.exclude_sessions)
        self.catch_up = CatchUp(self, enabled=settings.catch_up)  # its thread starts with the server (app.py)
        self.capture_options = CaptureOptions(
            redactor=build_redactor(settings.redact_patterns),
            redact_originals=settings.redact_originals,
            include_thinking=settings.include_thinking,
            injected=InjectedText.from_entries(settings.injected_blocks),
        )
        self.embedding = EmbeddingService(settings, provider)
        self.index: VectorIndex | None = None
        self.worker: EmbeddingWorker | None = None
        self.rebuilding = False
        self.rebuilt_from: str | None = None
        if self.embedding.provider is not None:
            identity = self.embedding.provider.identity
            built_with = recorded_identity(self.db.reader())
            self.rebuilding = prepare_table(self.db, identity)
            if self.rebuilding and built_with is not None:
                self.rebuilt_from = f"{built_with.model}/{built_with.variant}/{built_with.dimension}-d"
                self.metrics.counters["vector_rebuilds"] += 1
                log.warning(
                    "the vectors were built with %s, not the configured %s/%s/%d-d: dropped them and queued"
                    " every message to be embedded again (recall uses keyword search until then)",
                    self.rebuilt_from,
                    identity.model,
                    identity.variant,
                    identity.dimension,
                )
            self.index = VectorIndex(identity.dimension, shortlist=settings.vector_shortlist)
            self.worker = EmbeddingWorker(
                self.db, self.embedding.provider, self.index, batch_size=settings.embed_batch_size
            )
            loader = threading.Thread(
                target=self._load_index, args=(start_worker,), name="lossless-index-load", daemon=True
            )
            if background_load:
                loader.start()
            else:
                loader.run()
        terms = TermStats(settings.keyword_term_limit)
        self.assembler = Assembler(self.index, self.embedding, terms, clean=self.capture_options.injected.strip)
        self._last_prune_check = 0.0
        self._prune_lock = threading.Lock()
        self._closing = threading.Event()
        self.last_prune: dict[str, Any] | None = None
        if background_load and message_days.backfill_pending(self.db.reader()):
            threading.Thread(target=self._backfill_days, name="lossless-days-backfill", daemon=True).start()

    def _backfill_days(self) -> None:
        """Read the days that messages stored before migration m008 refer to, a batch per write, in the
        background (``store/message_days.py``): start-up never waits on it, and turns queue behind one batch."""
        try:
            while not self._closing.is_set() and self.db.write(message_days.backfill_step):
                self._closing.wait(DAYS_BACKFILL_PAUSE_S)
        except Exception:  # the thread's edge: recall goes on without those days, and the log says why
            if not self._closing.is_set():
                log.exception("the days older messages refer to could not be read")

    def _load_index(self, start_worker: bool) -> None:
        assert self.index is not None and self.worker is not None
        began = time.monotonic()
        try:
            self.index.load(self.db.reader())
        except self.db.module.DatabaseError as exc:  # a damaged page: keyword search goes on, the log says why
            log.error("the vector index could not be loaded, recall uses keyword search only: %s", translate_error(exc))
            return
        except Exception:  # the thread's edge: keyword search goes on, and the log says why
            log.exception("vector index could not be loaded, recall uses keyword search only")
            return
        self.metrics.counters["index_load_ms"] = round((time.monotonic() - began) * 1000)
        if start_worker:
            self.worker.start()

    # -- capture -------------------------------------------------------------------------------------------

    def _records(self, raw: Sequence[Any]) -> list[MessageRecord]:
        """Capture every message before any write: one bad message rejects the whole request."""
        now = time.time()
        return [capture(message, self.capture_options, now=now) for message in raw]

    def _after_write(self, stored: int) -> None:
        if stored and self.worker is not None:
            self.worker.notify()
        if time.monotonic() - self._last_prune_check >= PRUNE_CHECK_EVERY_S:
            self._last_prune_check = time.monotonic()  # archiving can take a while: never on the turn's path
            threading.Thread(target=self.maybe_prune, args=(True,), name="lossless-prune", daemon=True).start()

    def commit_turn(
        self,
        advancement_key: str,
        session_id: str,
        session_key: str | None,
        raw: Sequence[Any],
        *,
        heartbeat: bool,
        recall: RecallSettings,
    ) -> dict[str, Any]:
        check_identifier(advancement_key, "advancementKey")
        if not self.selection.captures(session_id, session_key):  # committed: the host must not retry it
            return {"status": "committed", "stored": 0, "skippedHeartbeat": False}
        skip = heartbeat and recall.skip_heartbeats
        records = [] if skip else messages.in_turn(self._records(raw), raw, advancement_key)

        agent: list[str] = []

        def work(conn: Connection) -> tuple[str, list[int]]:
            session = ensure_session(conn, session_id, session_key)
            agent[:] = [session.agent_id]
            status, ids = messages.commit_turn(conn, session, advancement_key, records, heartbeat=heartbeat)
            if skip and status == "committed":  # so that catch-up and import leave them out too
                skipped.remember(conn, session_id, raw)
            return status, ids

        began = time.perf_counter()
        status, ids = self.db.write(work)
        if status == "committed":
            self.activity.committed(agent[0], time.time())
        self.metrics.observe("commit-turn", time.perf_counter() - began)
        self.metrics.counters[f"turns_{status}"] += 1
        self.metrics.stored["commit-turn"] += len(ids)
        self._after_write(len(ids))
        if status == "committed" and records:  # a late or out-of-order turn: the host may hold more we missed
            self.catch_up.after_commit(session_id, session_key, max(record.created_at for record in records))
        return {"status": status, "stored": len(ids), "skippedHeartbeat": skip}

    def ingest(
        self, session_id: str, session_key: str | None, raw: Sequence[Any], *, heartbeat: bool, recall: RecallSettings
    ) -> int:
        """Store messages outside a durable turn; re-sent messages are stored once (content identity)."""
        if not self.selection.captures(session_id, session_key):
            return 0
        if heartbeat and recall.skip_heartbeats:  # recorded, so that catch-up and import leave them out too
            check_identifier(session_id, "sessionId")
            self.db.write(lambda conn: skipped.remember(conn, session_id, raw))
            return 0
        records = self._records(raw)

        def work(conn: Connection) -> list[int]:
            return messages.insert_records(conn, ensure_session(conn, session_id, session_key), records)

        ids = self.db.write(work)
        self.metrics.stored["ingest"] += len(ids)
        self._after_write(len(ids))
        return len(ids)

    def bootstrap(self, session_id: str, session_key: str | None) -> dict[str, Any]:
        """Register the session, importing its existing OpenClaw history the first time it is seen.

        Cheap when the session is already known: one read, no write.
        """
        from openclaw_lossless.history import import_session

        check_identifier(session_id, "sessionId")
        if not self.selection.captures(session_id, session_key):
            return {"bootstrapped": True, "importedMessages": 0, "reason": "excluded"}
        known = find_session(self.db.reader(), session_id)
        if known is not None and (known.session_key is not None or session_key is None):
            self.catch_up.after_bootstrap(session_id, known.session_key)  # seen again after a gap? (in its thread)
            return {"bootstrapped": True, "importedMessages": 0, "reason": "known"}
        imported = 0
        if known is None:
            imported = import_session(self, self.settings.openclaw_state, session_id, agent_of(session_key))
            self._after_write(imported)
        self.db.write(lambda conn: ensure_session(conn, session_id, session_key))
        return {"bootstrapped": True, "importedMessages": imported, "reason": "imported" if imported else "registered"}

    # -- recall --------------------------------------------------------------------------------------------

    def assemble(
        self,
        session_id: str,
        session_key: str | None,
        descriptors: Sequence[Descriptor],
        prompt: str | None,
        token_budget: int | None,
        recall: RecallSettings,
        now: float | None = None,
    ) -> AssembleResult:
        check_identifier(session_id, "sessionId")
        began = time.perf_counter()
        excluded = not self.selection.captures(session_id, session_key)
        if excluded:  # the recent window as the host sent it, and no recall
            recall = recall.model_copy(update={"retrieval_count": 0})
        request = AssembleInput(
            session_id=session_id,
            session_key=session_key,
            descriptors=descriptors,
            prompt=prompt,
            token_budget=token_budget or self.settings.default_token_budget,
            settings=recall,
            now=time.time() if now is None else now,
            deadline_s=self.settings.assemble_deadline_ms / 1000,
            recalled_text_chars=self.settings.recalled_text_chars,
        )
        result = self.assembler.assemble(self.db.reader(), request)
        if excluded:
            result.skipped = "excluded_session"
        else:
            self.catch_up.after_assemble(session_id, session_key, descriptors)
        self.activity.assembled(self._agent_of(session_id, session_key), session_id, result, time.time())
        self.metrics.observe("assemble", time.perf_counter() - began)
        if result.skipped:
            self.metrics.recall_skips[result.skipped] += 1
        return result

    def _agent_of(self, session_id: str, session_key: str | None) -> str:
        """The agent a turn belongs to: from its key (validated by the route), else from its stored session."""
        if session_key is not None:
            return agent_of(session_key)
        known = find_session(self.db.reader(), session_id)
        return known.agent_id if known is not None else agent_of(None)

    def search(self, text: str, scope: str, k: int, mode: str) -> list[dict[str, Any]]:
        began = time.perf_counter()
        conn = self.db.reader()
        hits = self.assembler.search(
            conn,
            text,
            self.scope(conn, scope),
            k,
            mode,
            self.settings.recall,
            time.time(),
            self.settings.assemble_deadline_ms / 1000,
        )
        sessions = dict(conn.execute("SELECT id, session_id FROM sessions").fetchall()) if hits else {}
        self.metrics.observe("search", time.perf_counter() - began)
        return [
            {
                "id": m.id,
                "citation": m.citation,
                "role": m.role,
                "kind": m.kind,
                "createdAt": m.created_at,
                "sessionId": sessions.get(m.session_rowid),
                "agentId": m.agent_id,
                "text": m.text,
                "score": round(c.relevance * c.weight, 6),
                "relevance": round(c.relevance, 6),
                "similarity": round(c.similarity, 6),
                "cosine": c.cosine,
                "keyword": c.keyword,
                "lanes": sorted(c.lanes),
            }
            for c, m in hits
        ]

    def scope(self, conn: Connection, spec: str) -> Scope:
        """Parse a search scope: 'all', 'agent:<agentId>' or 'session:<sessionId>'."""
        if spec == "all":
            agents = frozenset(str(r[0]) for r in conn.execute("SELECT DISTINCT agent_id FROM sessions"))
            return Scope(agent_ids=agents)
        kind, _, value = spec.partition(":")
        if kind == "agent" and value:
            return Scope(agent_ids=frozenset({value}))
        if kind == "session" and value:
            return Scope(session_rowids=frozenset({self.session(value).rowid}))
        raise BadRequest("scope must be 'all', 'agent:<agentId>' or 'session:<sessionId>'")

    def recall_settings(self, overrides: RecallOverrides | None) -> RecallSettings:
        base = self.settings.recall
        return overrides.apply(base) if overrides is not None else base

    # -- compaction, subagents -----------------------------------------------------------------------------

    def compact(self, session_id: str, session_key: str | None, record: snapshots.CompactionRecord) -> dict[str, Any]:
        """Record the host's compaction. Its summary is the host model's retelling of the turns it replaced, so it
        can quote whatever they held: it is redacted like a message before it is stored, and so is the reason."""
        redact = self.capture_options.redactor.redact_optional
        record = dataclasses.replace(record, summary=redact(record.summary), reason=redact(record.reason))

        def work(conn: Connection) -> dict[str, Any]:
            session = ensure_session(conn, session_id, session_key)  # a catch-up may have imported it already
            return claim_imported(conn, session, record) or snapshots.record_compaction(conn, session, record)

        return {"recorded": True, **self.db.write(work)}

    def subagent_spawn(self, parent_key: str, child_key: str, context_mode: str | None) -> int:
        return self.db.write(lambda conn: subagents.link(conn, parent_key, child_key, context_mode))

    def subagent_rollback(self, spawn_id: int | None, child_key: str | None) -> bool:
        return self.db.write(lambda conn: subagents.unlink(conn, spawn_id, child_key))

    def subagent_ended(self, child_key: str, reason: str) -> dict[str, Any]:
        reason = self.capture_options.redactor.redact(reason)  # free text from the host, stored: redacted
        linked, copied = self.db.write(lambda conn: subagents.end(conn, child_key, reason))
        self._after_write(copied)
        self.catch_up.after_subagent_ended(child_key)  # the parent's announce turn is never committed
        return {"ended": linked, "outcomesCopied": copied}

    # -- operators -----------------------------------------------------------------------------------------

    def session(self, session_id: str) -> SessionRef:
        found = find_session(self.db.reader(), session_id)
        if found is None:
            raise NotFound(f"no session {session_id[:80]!r} is stored")
        return found

    def recover(self, session_id: str | None, last: int, up_to: int | None = None) -> dict[str, Any]:
        """A session's last messages (the most recently active session when none is named)."""
        session = self.session(session_id) if session_id else self.latest_session()
        return {
            "sessionId": session.session_id,
            "sessionKey": session.session_key,
            "agentId": session.agent_id,
            "upTo": None if up_to is None else f"msg:{up_to}",
            "messages": messages.recent(self.db.reader(), session.rowid, last, up_to),
        }

    def message(self, message_id: int, context: int) -> dict[str, Any]:
        """The message a citation ``msg:<id>`` names, with ``context`` messages of its session either side."""
        conn = self.db.reader()
        found = messages.around(conn, message_id, context)
        if found is None:
            raise NotFound(
                f"no message msg:{message_id} is in the store; archived messages live in the JSONL archive "
                "under the state dir ('openclaw-lossless stats' shows how many were archived)"
            )
        session = session_by_rowid(conn, found.session_rowid)
        return {
            "sessionId": session.session_id,
            "sessionKey": session.session_key,
            "agentId": session.agent_id,
            "message": found.message,
            "before": found.before,
            "after": found.after,
        }

    def latest_session(self) -> SessionRef:
        row = self.db.reader().execute("SELECT session_id FROM sessions ORDER BY last_seen_at DESC LIMIT 1").fetchone()
        if row is None:
            raise NotFound("the store holds no sessions yet")
        return self.session(str(row[0]))

    def snapshot_create(self, name: str, session_id: str | None) -> dict[str, Any]:
        session = self.session(session_id) if session_id else self.latest_session()
        last = self.db.write(lambda conn: snapshots.create_snapshot(conn, session, name))
        return {"name": name, "sessionId": session.session_id, "lastMessageId": last}

    def snapshot(self, name: str) -> dict[str, Any]:
        found = snapshots.find_snapshot(self.db.reader(), name)
        if found is None:
            raise NotFound(f"no snapshot named {name!r}; 'openclaw-lossless snapshot list' shows them")
        return found

    def snapshots(self) -> list[dict[str, Any]]:
        return snapshots.list_snapshots(self.db.reader())

    def compaction(self, compaction_id: int) -> dict[str, Any]:
        found = snapshots.find_compaction(self.db.reader(), compaction_id)
        if found is None:
            raise NotFound(f"no compaction {compaction_id}; 'openclaw-lossless stats' counts them")
        if found["status"] != snapshots.COMPACTED:  # the host removed nothing: there is no "before" to show
            why = f" ({found['reason']})" if found["reason"] else ""
            raise BadRequest(
                f"compaction {compaction_id} did not compact: {found['status']}{why}; the host removed nothing"
                f" then, so 'recover --session {found['sessionId']}' shows the whole conversation"
            )
        return found

    def pack(self, query: str, budget_tokens: int, scope: str, count: int | None) -> dict[str, Any]:
        """The bounded, cited context bundle for a query: what assemble would recall with an empty window."""
        conn = self.db.reader()
        # The caller's budget is the bundle's cap: the per-turn recallTokenBudget does not shrink it.
        recall = self.settings.recall.model_copy(update={"recall_token_budget": budget_tokens})
        if count is not None:
            recall = recall.model_copy(update={"retrieval_count": count})
        request = AssembleInput(
            session_id="pack",
            session_key=None,
            descriptors=[],
            prompt=query,
            token_budget=budget_tokens,
            settings=recall,
            now=time.time(),
            deadline_s=self.settings.assemble_deadline_ms / 1000,
            recalled_text_chars=self.settings.recalled_text_chars,
            scope=self.scope(conn, scope),
        )
        result = self.assembler.assemble(conn, request)
        texts = messages.fetch(conn, [item["id"] for item in result.recalled])
        items = [item | {"text": texts[item["id"]].text} for item in result.recalled]
        return {
            "query": query,
            "budgetTokens": budget_tokens,
            "estimatedTokens": result.estimated_tokens,
            "items": items,
            "block": result.system_prompt_addition,
            "recallSkipped": result.skipped,
            "trace": {"query": result.query, "candidates": result.trace()},
        }

    def maybe_prune(self, force: bool = False) -> None:
        """Keep the store under maxDbSizeMb; checked at most every 30 s, in a thread of its own."""
        now = time.monotonic()
        if not force and now - self._last_prune_check < PRUNE_CHECK_EVERY_S:
            return
        if not self._prune_lock.acquire(blocking=False):
            return
        try:
            self._last_prune_check = now
            result = archive.prune(self.db, self.settings.archive_dir, self.settings.max_db_size_mb)
            if result["pruned"]:
                self.last_prune = result | {"at": time.time()}
                self.metrics.counters["messages_archived"] += int(result["pruned"])
                if self.index is not None:
                    self.index.forget_through(int(result["lastMessageId"]))
                if self.assembler.terms is not None:
                    self.assembler.terms.clear()
        except LosslessError as exc:
            log.warning("archiving to stay under maxDbSizeMb failed: %s", exc.message)
        except Exception:
            if not self._closing.is_set():
                raise
            # closed under it: the archive is written before anything is removed, so nothing is lost; the
            # next start archives again
            log.info("archiving stopped: the sidecar is closing")
        finally:
            self._prune_lock.release()

    def health(self) -> dict[str, Any]:
        """Liveness and readiness: ``ok``; ``degraded`` (hooks work, recall is keyword-only); ``unavailable``.

        ``unavailable`` means a turn cannot be stored now (the database takes no write lock or cannot be
        read); the route answers it with 503, so a supervisor or the plugin's start-up wait sees it. A store
        that fails is reported here, never raised: the operator needs this document most exactly then.
        """
        problem = self._write_problem()
        vec_version: str | None = None
        backlog: int | None = None
        try:
            conn = self.db.reader()
            vec_version = str(conn.execute("SELECT vec_version()").fetchone()[0])
            backlog = backlog_size(conn)
        except LosslessError as exc:
            problem = problem or exc.message
        except self.db.module.Error as exc:
            problem = problem or str(translate_error(exc))
        writable = problem is None
        return {
            "status": "unavailable" if not writable else ("ok" if self.embedding.status.ready else "degraded"),
            "version": __version__,
            "pid": os.getpid(),
            "database": {"writable": writable, "problem": problem},
            "sqliteVec": vec_version,
            "embedder": self._embedder_view(),
            "backlog": backlog,
            "vectorIndex": self._index_view(),
            "agents": self.activity.times(),
            "catchUp": self.catch_up.view(short=True),
        }

    def _write_problem(self) -> str | None:
        """Why the store cannot take a write now, or None: takes the write lock, as a commit would."""
        try:
            self.db.write(lambda conn: conn.execute("SELECT 1").fetchone())
        except LosslessError as exc:
            return exc.message
        except self.db.module.Error as exc:  # not one of ours: e.g. "attempt to write a readonly database"
            return str(exc)
        return None

    def _index_view(self) -> dict[str, Any] | None:
        if self.index is None:
            return None
        return {
            "loaded": self.index.loaded.is_set(),
            "vectors": len(self.index),
            "searchesWhileLoading": self.index.searches_while_loading,
        }

    def _embedder_view(self) -> dict[str, Any]:
        status = self.embedding.status
        worker = self.worker.stats if self.worker is not None else None
        api = getattr(self.embedding.provider, "stats", None)  # an API provider's requests and failures by kind
        return {
            "configured": status.configured,
            "active": status.active,
            "model": status.model,
            "variant": status.variant,
            "dimension": status.dimension,
            "ready": status.ready,
            "reason": status.reason,
            "fallbacks": dict(status.fallbacks),
            "rebuilding": self.rebuilding,
            "rebuiltFrom": self.rebuilt_from,
            "worker": None
            if worker is None
            else {
                "embedded": worker.embedded,
                "failures": worker.failures,
                "lastError": worker.last_error,
                "backoffS": worker.backoff_s,
                "drainRatePerS": round(worker.drain_rate(), 2),
            },
            "api": api.as_dict() if isinstance(api, EmbedderStats) else None,
        }

    def stats(self) -> dict[str, Any]:
        conn = self.db.reader()

        def count(sql: str) -> int:
            return int(conn.execute(sql).fetchone()[0])

        compactions = snapshots.compaction_counts(conn)
        return {
            "version": __version__,
            "uptimeS": round(time.monotonic() - self.started, 1),
            "messages": count("SELECT count(*) FROM messages"),
            "sessions": count("SELECT count(*) FROM sessions"),
            "agents": count("SELECT count(DISTINCT agent_id) FROM sessions"),
            "turns": count("SELECT count(*) FROM turns"),
            "compactions": compactions[snapshots.COMPACTED],  # only those that did compact
            "compactionFailures": compactions[snapshots.FAILED],
            "compactionOutcomes": compactions,  # every status, failed and skipped (nothing to compact) too
            "snapshots": count("SELECT count(*) FROM snapshots"),
            "forgotten": count("SELECT count(*) FROM forgotten"),  # tombstones: messages forgotten on request
            "subagents": count("SELECT count(*) FROM subagent_links"),
            "vectors": len(self.index) if self.index is not None else 0,
            "vectorIndex": self._index_view(),
            "backlog": backlog_size(conn),
            "embedder": self._embedder_view(),
            "database": {
                "path": str(self.db.path),
                "bytes": self.db.file_bytes(),
                "usedBytes": archive.used_bytes(conn),
                "maxDbSizeMb": self.settings.max_db_size_mb,
            },
            "archive": {
                "archivedMessages": count("SELECT coalesce(sum(message_count), 0) FROM archives"),
                "archives": count("SELECT count(*) FROM archives"),
                "last": self.last_prune,
            },
            "latency": self.metrics.latency(),
            "recallSkips": dict(self.metrics.recall_skips),
            "counters": dict(self.metrics.counters),
            "agentActivity": self.activity.times(),
            "catchUp": self.catch_up.view(),
        }

    def close(self) -> None:
        self._closing.set()
        # A size check under way finishes first (bounded): its thread must not reopen the closed store.
        if self._prune_lock.acquire(timeout=PRUNE_CLOSE_WAIT_S):
            self._prune_lock.release()
        self.catch_up.close()
        if self.worker is not None:
            self.worker.stop()
        self.assembler.close()
        self.embedding.close()
        with contextlib.suppress(LosslessError):
            self.db.close()


ProviderFactory = Callable[[Settings], EmbeddingProvider]


def open_store(settings: Settings, provider_factory: ProviderFactory = build_provider) -> Sidecar:
    """The store opened in this process for queries (a ``Sidecar`` without its worker), never at the cost of
    its vectors: a provider whose identity differs from the one recorded with them would have them dropped
    and rebuilt (a CLI search run with another model's settings would wipe a million vectors), so then (or
    with no vectors, or no provider) search runs on keywords alone."""
    provider: EmbeddingProvider | None = None
    recorded = _recorded_identity(settings)
    if recorded is not None and settings.embedding_provider != "none":
        try:
            candidate = provider_factory(settings)
        except LosslessError as exc:
            log.warning("embeddings unavailable, keyword search only: %s", exc.message)
        else:
            if candidate.identity == recorded:
                provider = candidate
            else:
                log.warning(
                    "the configured embedder %s is not the one the stored vectors were made with (%s): "
                    "keyword search only",
                    candidate.identity,
                    recorded,
                )
                candidate.close()
    if provider is None:
        settings = settings.model_copy(update={"embedding_provider": "none"})
    return Sidecar(settings, start_worker=False, provider=provider)


@contextlib.contextmanager
def store_for_queries(settings: Settings, provider_factory: ProviderFactory = build_provider) -> Iterator[Sidecar]:
    """``open_store`` for one piece of work, closed after it with the provider built for it."""
    sidecar = open_store(settings, provider_factory)
    try:
        yield sidecar
    finally:
        provider = sidecar.embedding.provider
        sidecar.close()
        if provider is not None:  # handed to the store, so not closed by it
            provider.close()


def _recorded_identity(settings: Settings) -> ProviderIdentity | None:
    """The embedder the store's vectors were made with (read only; None when there are none)."""
    try:
        conn = open_connection(settings.database_path, readonly=True)
    except LosslessError:
        return None
    try:
        return recorded_identity(conn)
    except sqlite_module().Error:  # no meta table yet: no vectors either
        return None
    finally:
        conn.close()
