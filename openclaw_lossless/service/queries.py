"""Every read: the recall assemble adds to a turn, and what an operator or an agent tool asks of the store.

Why one room: these all read the store through the one ``Assembler`` (hybrid search, scoring, budgets) or
the store's own lookups, and none of them writes the conversation record. ``assemble`` is the hot path: it
does its reading here and leaves anything heavy (catch-up's checks) to catch-up's thread.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from openclaw_lossless.config import RecallSettings, Settings
from openclaw_lossless.embed.in_flight import InFlight, counted
from openclaw_lossless.errors import BadRequest, NotFound
from openclaw_lossless.observe.activity import Activity
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.recall.assemble import AssembleInput, Assembler, AssembleResult, Recalled
from openclaw_lossless.recall.window import Descriptor
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.messages import MessageView
from openclaw_lossless.store.model.sessions import Scope, agent_of, check_identifier
from openclaw_lossless.store.model.snapshots import COMPACTED, CompactionListed, CompactionPoint, Snapshot
from openclaw_lossless.store.model.timelines import SessionSummary, Timeline, Window
from openclaw_lossless.transcripts.catchup import CatchUp


@dataclass(frozen=True)
class Hit:
    """One search hit, with the score parts a caller may weigh (``score`` orders the hits)."""

    id: int
    citation: str
    role: str
    kind: str
    created_at: float
    session_id: str | None
    agent_id: str
    text: str
    score: float
    relevance: float
    similarity: float
    cosine: float | None
    keyword: float | None
    lanes: list[str]


@dataclass(frozen=True)
class Searched:
    """A search's answer: the hits, the lanes they were drawn from, and why a lane gave none if one ran out of
    time (``Found``), so that a caller never reads "no hits" as "nothing matches" when a lane gave up."""

    query: str
    scope: str
    mode: str
    hits: list[Hit]
    lanes_ran: list[str]
    skipped: str | None
    source: str = "all"


SOURCES = ("all", "memory", "messages")  # what a search may be narrowed to (docs/workspace-memory.md)


@dataclass(frozen=True)
class Packed:
    """A bounded, cited context bundle: its lines with their texts, the block, and the full trace."""

    query: str
    budget_tokens: int
    estimated_tokens: int
    items: list[Recalled]
    block: str
    recall_skipped: str | None
    trace: dict[str, Any]  # {"query": what was searched, "candidates": every candidate's score parts}


@dataclass(frozen=True)
class Recovered:
    """A session's messages as stored, oldest first, up to a message when one was named (``msg:<id>``)."""

    session_id: str
    session_key: str | None
    agent_id: str
    up_to: str | None
    messages: list[MessageView]


@dataclass(frozen=True)
class Cited:
    """The message a citation names, with messages of its session either side."""

    session_id: str
    session_key: str | None
    agent_id: str
    message: MessageView
    before: list[MessageView]
    after: list[MessageView]


class Queries:
    """The read side: assemble's recall, search, pack, recover, a cited message, snapshots, compactions."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        *,
        selection: SessionSelection,
        assembler: Assembler,
        activity: Activity,
        metrics: Metrics,
        catch_up: CatchUp,
        in_flight: InFlight | None = None,
    ) -> None:
        self.settings = settings
        self.db, self.ops = store.db, store.ops
        self.selection = selection
        self.assembler = assembler
        self.activity = activity
        self.metrics = metrics
        self.catch_up = catch_up
        self.in_flight = in_flight or InFlight()  # assemble and search count as requests (embed/in_flight.py)

    # -- the host's turn -----------------------------------------------------------------------------------

    @counted
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
        """The window and the recalled block for a turn; an excluded session gets its window and no recall."""
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
        known = self.ops.sessions.find_session(self.db.reader(), session_id)
        return known.agent_id if known is not None else agent_of(None)

    # -- search and pack -----------------------------------------------------------------------------------

    @counted
    def search(self, text: str, scope: str, k: int, mode: str, source: str = "all") -> Searched:
        """The ``k`` best hits for ``text`` in ``scope``, each with the score parts a caller may weigh; ``source``
        narrows them to the workspace memory files (``memory``) or the conversation (``messages``)."""
        began = time.perf_counter()
        conn = self.db.reader()
        found = self.assembler.search(
            conn,
            text,
            self.of_source(conn, self.scope(conn, scope), source),
            k,
            mode,
            self.settings.recall,
            time.time(),
            self.settings.assemble_deadline_ms / 1000,
        )
        sessions = self.ops.sessions.session_ids(conn) if found.hits else {}
        self.metrics.observe("search", time.perf_counter() - began)
        hits = [
            Hit(
                id=m.id,
                citation=m.citation,
                role=m.role,
                kind=m.kind,
                created_at=m.created_at,
                session_id=sessions.get(m.session_rowid),
                agent_id=m.agent_id,
                text=m.text,
                score=round(c.relevance * c.weight, 6),
                relevance=round(c.relevance, 6),
                similarity=round(c.similarity, 6),
                cosine=c.cosine,
                keyword=c.keyword,
                lanes=sorted(c.lanes),
            )
            for c, m in found.hits
        ]
        return Searched(text, scope, mode, hits, sorted(found.lanes_ran), found.skipped, source)

    def of_source(self, conn: Any, scope: Scope, source: str) -> Scope:
        """``scope`` narrowed to one source: ``memory`` (the agents' memory-file sessions), ``messages`` (all but
        those), or ``all`` as it is."""
        if source == "all":
            return scope
        if source not in SOURCES:
            raise BadRequest("source must be 'all', 'memory' or 'messages'")
        notes = self.ops.memory_files.sessions(conn)
        if source == "messages":
            return replace(scope, excluded=scope.excluded | set(notes.values()))
        agents = set(scope.agent_ids)
        if scope.session_rowids:
            agents |= {self.ops.sessions.session_by_rowid(conn, rowid).agent_id for rowid in scope.session_rowids}
        return Scope(session_rowids=frozenset(rowid for agent, rowid in notes.items() if agent in agents))

    def scope(self, conn: Any, spec: str) -> Scope:
        """Parse a search scope: 'all', 'agent:<agentId>' or 'session:<sessionId>'."""
        if spec == "all":
            return Scope(agent_ids=self.ops.sessions.agent_ids(conn))
        kind, _, value = spec.partition(":")
        if kind == "agent" and value:
            return Scope(agent_ids=frozenset({value}))
        if kind == "session" and value:
            return Scope(session_rowids=frozenset({self.ops.sessions.require_session(conn, value).rowid}))
        raise BadRequest("scope must be 'all', 'agent:<agentId>' or 'session:<sessionId>'")

    def pack(self, query: str, budget_tokens: int, scope: str, count: int | None) -> Packed:
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
        texts = self.ops.messages.fetch(conn, [item.id for item in result.recalled])
        items = [replace(item, text=texts[item.id].text) for item in result.recalled]
        trace = {"query": result.query, "candidates": result.trace()}
        return Packed(
            query, budget_tokens, result.estimated_tokens, items, result.system_prompt_addition, result.skipped, trace
        )

    # -- the record as stored ------------------------------------------------------------------------------

    def recover(self, session_id: str | None, last: int, up_to: int | None = None) -> Recovered:
        """A session's last messages (the most recently active session when none is named)."""
        conn = self.db.reader()
        session = (
            self.ops.sessions.require_session(conn, session_id)
            if session_id
            else self.ops.sessions.latest_session(conn)
        )
        return Recovered(
            session.session_id,
            session.session_key,
            session.agent_id,
            None if up_to is None else f"msg:{up_to}",
            self.ops.messages.recent(self.db.reader(), session.rowid, last, up_to),
        )

    def message(self, message_id: int, context: int) -> Cited:
        """The message a citation ``msg:<id>`` names, with ``context`` messages of its session either side."""
        conn = self.db.reader()
        found = self.ops.messages.around(conn, message_id, context)
        if found is None:
            raise NotFound(
                f"no message msg:{message_id} is in the store; archived messages live in the JSONL archive "
                "under the state dir ('openclaw-lossless stats' shows how many were archived)"
            )
        session = self.ops.sessions.session_by_rowid(conn, found.session_rowid)
        return Cited(
            session.session_id, session.session_key, session.agent_id, found.message, found.before, found.after
        )

    def snapshot(self, name: str) -> Snapshot:
        """A named snapshot: the session and the last message it marks."""
        found = self.ops.snapshots.find_snapshot(self.db.reader(), name)
        if found is None:
            raise NotFound(f"no snapshot named {name!r}; 'openclaw-lossless snapshot list' shows them")
        return found

    def snapshots(self) -> list[Snapshot]:
        """Every named snapshot, for ``snapshot list`` and ``GET /v1/snapshots``."""
        return self.ops.snapshots.list_snapshots(self.db.reader())

    def sessions(self, agent: str | None, limit: int) -> list[SessionSummary]:
        """The sessions last begun (of one agent, or all), with their counts: the index of timelines."""
        return self.ops.timelines.session_summaries(self.db.reader(), agent, limit)

    def timeline(self, session_id: str, window: Window) -> Timeline:
        """One page of a session's messages with the compactions, snapshots, spawns and resets that fall on it."""
        conn = self.db.reader()
        return self.ops.timelines.read_timeline(conn, self.ops.sessions.require_session(conn, session_id), window)

    def compactions(self, limit: int, status: str | None = None) -> list[CompactionListed]:
        """The latest recorded compactions (of one status, or all), newest first: the UI's list of them."""
        return self.ops.snapshots.list_compactions(self.db.reader(), limit, status)

    def compaction(self, compaction_id: int) -> CompactionPoint:
        """A compaction that removed something: the point ``recover --before-compaction`` goes back to."""
        found = self.ops.snapshots.find_compaction(self.db.reader(), compaction_id)
        if found is None:
            raise NotFound(f"no compaction {compaction_id}; 'openclaw-lossless stats' counts them")
        if found.status != COMPACTED:  # the host removed nothing: there is no "before" to show
            why = f" ({found.reason})" if found.reason else ""
            raise BadRequest(
                f"compaction {compaction_id} did not compact: {found.status}{why}; the host removed nothing"
                f" then, so 'recover --session {found.session_id}' shows the whole conversation"
            )
        return found
