"""Assembly: the recent window plus a Recalled Context block of the most relevant older messages.

1. Window: the newest host messages within ``windowShare × budget`` (``window.py``).
2. Query (``query.py``): the prompt on its own, and the prompt read with the window's last three user
   messages; the keyword lane looks for the prompt's words.
3. Candidates from the vector and keyword lanes, over the recall scope, minus what the window already holds.
4. Scoring (``scoring.py``): drop below ``minSimilarity``, rank the rest by the lanes' mean × recency × weight,
   once for the prompt in context and, when the window gave it context, once for the prompt alone.
5. The best ``retrievalCount`` that fit the room (the rest of the host's budget, capped at
   ``recallTokenBudget`` for the whole block), taken from the two rankings in turn, the prompt's first:
   the prompt's own best matches get at least ``PROMPT_SHARE`` of the hits, so a direct question finds
   what it asks for whatever the recent turns are about. With ``recall_duplicate_cosine`` below 1, a hit
   that near-repeats one already kept is left out (``_Distinct``). Chunks of the agent's workspace memory
   files (kind ``memory``, docs/workspace-memory.md) take at most ``memory_file_share`` of the room.
6. Neighbours: up to ``neighbourRadius`` messages either side of each kept hit in its session, hits in rank
   order and each hit's nearest first, while the room lasts. The answer to a question often sits a turn or
   two away from the turn that shares its words (the reply to a matching question, the question a matching
   answer replies to); on LoCoMo the same tokens buy more recall as neighbours than as further hits.
7. Rendered oldest first (``render.py``): chronological order keeps each neighbour next to its hit, so the
   block reads as the excerpts of conversation it is, with dates in order.
The work is read-only: assemble never writes, so it never waits on the writer.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from openclaw_lossless.capture import grams, injected
from openclaw_lossless.config import RecallSettings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.embed.model_files import cosine_scale
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.embed.service import EmbeddingService
from openclaw_lossless.recall import render, when
from openclaw_lossless.recall.query import Query, QueryVectors, combine
from openclaw_lossless.recall.scoring import Candidate, score
from openclaw_lossless.recall.search import fts_query, keyword_search, pair_coverage, query_pairs, query_terms
from openclaw_lossless.recall.window import Descriptor, query_parts, window_start
from openclaw_lossless.store.api import TermStats
from openclaw_lossless.store.backend import Backend
from openclaw_lossless.store.model.memory_files import KIND as MEMORY_KIND
from openclaw_lossless.store.model.memory_files import session_id_of
from openclaw_lossless.store.model.messages import Neighbour, StoredMessage
from openclaw_lossless.store.model.sessions import DEFAULT_AGENT, Scope, SessionRef, agent_of

LANE_DEPTH = 100
LANE_THREADS = 4  # vector lanes running at once, beside their requests' keyword lanes
WINDOW_SLACK = 8  # stored messages read past the window's size when finding the window's own
PROMPT_SHARE = 0.5  # of the hits, taken from the prompt's own ranking first when the window gives it context


@dataclass(frozen=True)
class AssembleInput:
    session_id: str
    session_key: str | None
    descriptors: Sequence[Descriptor]
    prompt: str | None
    token_budget: int
    settings: RecallSettings
    now: float
    deadline_s: float
    recalled_text_chars: int
    scope: Scope | None = None


@dataclass(frozen=True, slots=True)
class Recalled:
    """One hit or neighbour in the Recalled Context block: which message, its score, whose neighbour it is.

    ``text`` is filled only by ``pack``, which hands the texts out; assemble's answer names the lines only.
    """

    id: int
    citation: str
    role: str
    created_at: float
    score: float
    kind: str
    neighbour_of: str | None
    text: str | None = None


@dataclass(frozen=True)
class Found:
    """An operator's or agent's search: the ranked hits, the lanes they were drawn from, and why a lane asked
    for gave none, so that no hits from it is never taken for nothing matching: ``AssembleResult.skipped``'s
    ``keyword_deadline`` and ``deadline``, or ``vector_unavailable`` (an embedding model is configured, but it
    is unavailable or did not embed the query in time). Without a model configured there is no vector lane
    to miss."""

    hits: list[tuple[Candidate, StoredMessage]]
    lanes_ran: frozenset[str]
    skipped: str | None


@dataclass
class AssembleResult:
    window_start: int
    window_tokens: int
    estimated_tokens: int
    system_prompt_addition: str
    recalled: list[Recalled] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    skipped: str | None = None
    query: str = ""
    query_parts: list[str] = field(default_factory=list)
    keyword_query: str = ""
    lanes_ran: frozenset[str] = frozenset()
    # What the keyword lane looked for (``search.query_terms``) when it holds an unspaced run; else empty
    keyword_terms: tuple[str, ...] = ()
    # Milliseconds per phase (setup, lanes, choose, neighbours, render): where a slow turn spent its time.
    phases: dict[str, float] = field(default_factory=dict)

    def trace(self) -> list[dict[str, Any]]:
        return [asdict(c) | {"lanes": sorted(c.lanes), "citation": f"msg:{c.message_id}"} for c in self.candidates]


class Assembler:
    def __init__(
        self,
        ops: Backend,
        index: Nearest | None,
        embedding: EmbeddingService,
        terms: TermStats[Any] | None = None,
        clean: Callable[[str], str] = injected.DEFAULT.strip,
    ) -> None:
        self.ops = ops  # the store's backend: every read below goes through its modules
        self.index = index
        self.embedding = embedding
        self.terms = terms
        self.clean = clean  # what the host or a plugin injected into the prompt is not searched for
        # The vector lane (embed the query, scan the index) runs beside the keyword lane: onnxruntime, numpy and
        # SQLite all release the GIL, so on two cores a turn waits for the slower lane rather than for both.
        self._lanes = concurrent.futures.ThreadPoolExecutor(LANE_THREADS, thread_name_prefix="lossless-lane")

    def close(self) -> None:
        self._lanes.shutdown(wait=False, cancel_futures=True)

    def assemble(self, conn: Any, request: AssembleInput) -> AssembleResult:
        clock = _PhaseClock()
        deadline = time.monotonic() + request.deadline_s
        descriptors = request.descriptors
        start = window_start(descriptors, int(request.settings.window_share * request.token_budget))
        window = descriptors[start:]
        window_tokens = sum(d.tokens for d in window)
        result = AssembleResult(start, window_tokens, window_tokens, "")
        result.query_parts = query_parts(request.prompt, window, clean=self.clean)
        query = Query(tuple(result.query_parts), bool(request.prompt and request.prompt.strip()))
        result.query, result.keyword_query = query.text, query.keyword_text
        room = request.token_budget - window_tokens
        if request.settings.recall_token_budget:
            room = min(room, request.settings.recall_token_budget)
        room -= render.frame_tokens()
        if request.settings.retrieval_count == 0 or room <= 0 or not result.query:
            result.skipped = "no_room" if room <= 0 else ("no_query" if not result.query else None)
            return result
        session = self._session(conn, request)
        scope = request.scope or self._scope(conn, session, request.settings)
        window_keys = {d.key for d in window}
        skip = _stored_window(self.ops, conn, session, window_keys)
        clock.lap(result, "setup")
        candidates = self._candidates(conn, result, query, scope, deadline, skip=skip)
        clock.lap(result, "lanes")
        chosen, stored, room = self._choose(conn, request, result, candidates, window_keys, room)
        clock.lap(result, "choose")
        if request.settings.neighbour_radius and chosen:
            self._neighbours(conn, request, result, scope, chosen, stored, window_keys, room)
        clock.lap(result, "neighbours")
        self._render(result, chosen, stored)
        clock.lap(result, "render")
        return result

    def _scope(self, conn: Any, session: SessionRef, settings: RecallSettings) -> Scope:
        """The session's recall scope; its agent's workspace memory files are in it whatever the scope's mode
        (an agent's own notes are never another session's), and out of it when their share is 0."""
        scope = self.ops.sessions.recall_scope(conn, session, settings.recall_scope)
        if settings.recall_scope == "agent" and settings.memory_file_share > 0:
            return scope  # the agent's sessions hold its memory-file session already
        notes = self.ops.sessions.find_session(conn, session_id_of(session.agent_id))
        if notes is None:
            return scope
        if settings.memory_file_share > 0:
            return replace(scope, session_rowids=scope.session_rowids | {notes.rowid})
        return replace(scope, excluded=scope.excluded | {notes.rowid})

    def _session(self, conn: Any, request: AssembleInput) -> SessionRef:
        known = self.ops.sessions.find_session(conn, request.session_id)
        if known is not None:
            return known
        agent = agent_of(request.session_key) if request.session_key else DEFAULT_AGENT
        return SessionRef(-1, request.session_id, request.session_key, agent)

    def search(
        self,
        conn: Any,
        text: str,
        scope: Scope,
        k: int,
        mode: str,
        settings: RecallSettings,
        now: float,
        deadline_s: float,
    ) -> Found:
        """Ranked hits for an operator or agent query: the same lanes and score parts as recall."""
        probe = AssembleResult(0, 0, 0, "", query=text, query_parts=[text], keyword_query=text)
        found = self._candidates(conn, probe, Query((text,), True), scope, time.monotonic() + deadline_s, lanes=mode)
        stored = self.ops.messages.fetch(conn, list(found))
        hits = []
        pairs = query_pairs(probe.keyword_terms)
        for candidate in found.values():
            message = stored.get(candidate.message_id)
            if message is None or not message.text.strip():
                continue
            if pairs and candidate.keyword:
                candidate.keyword_coverage = pair_coverage(probe.keyword_terms, message.text, pairs)
            score(
                candidate,
                role=message.role,
                importance_score=message.importance,
                age_hours=(now - message.created_at) / 3600,
                half_life_hours=settings.recency_decay_hours,
                recency_floor=settings.recency_floor,
                lanes=probe.lanes_ran,
            )
            hits.append((candidate, message))
        boost = settings.recall_time_boost
        when.weigh(conn, self.ops.message_days, when.TimeQuestion.of(text, now), [c for c, _ in hits], stored, boost)
        timed = {True: 1.0 + boost, False: 1.0}
        hits.sort(key=lambda p: (-p[0].relevance * p[0].weight * timed[p[0].time_match is not None], p[0].message_id))
        return Found(hits[:k], probe.lanes_ran, probe.skipped or self._vector_missed(mode, probe.lanes_ran))

    def _vector_missed(self, mode: str, ran: frozenset[str]) -> str | None:
        """``vector_unavailable`` when the vector lane was asked for, a model is configured, and it gave nothing."""
        wanted = mode != "keyword" and self.embedding.status.configured != "none"
        return "vector_unavailable" if wanted and "vector" not in ran else None

    def _candidates(
        self,
        conn: Any,
        result: AssembleResult,
        query: Query,
        scope: Scope,
        deadline: float,
        lanes: str = "hybrid",
        skip: frozenset[int] = frozenset(),
    ) -> dict[int, Candidate]:
        """Each lane's best ``LANE_DEPTH`` in scope, ``skip`` (the window's messages) left out.

        The lanes reach ``len(skip)`` deeper so that a window full of matching messages cannot crowd the older
        matches out of them. Keyword scores stay relative to the best keyword hit, window or not. With the
        prompt searched on its own too, the vector lane keeps each query's nearest and scores both for each.
        """
        found: dict[int, Candidate] = {}
        depth = LANE_DEPTH + len(skip)
        vector_lane = self._lanes.submit(self._vector_lane, query, scope, depth) if lanes != "keyword" else None
        try:
            keyword_depth = depth if lanes in ("hybrid", "keyword") else 0
            text = query.keyword_text
            hits = keyword_search(conn, self.ops.fulltext, text, scope, keyword_depth, deadline, self.terms)
            timed_out = False
        except TimeoutError:
            hits, timed_out = [], True
        vectors, nearest = vector_lane.result() if vector_lane is not None else (None, [])
        if timed_out:
            result.skipped = "keyword_deadline" if vectors is not None else "deadline"
        ran = {"vector"} if vectors is not None and self.index is not None else set()
        # The keyword lane ran if it found something, or (rarely asked) if the query had words to look for.
        if keyword_depth > 0 and not timed_out and (hits or fts_query(text) is not None):
            ran.add("keyword")
        result.lanes_ran = frozenset(ran)
        result.keyword_terms = tuple(query_terms(text)) if grams.has_unspaced(text) else ()
        scale = cosine_scale(self.embedding.status.model)
        for message_id, cosines in nearest:
            if message_id not in skip:
                _set_cosines(found.setdefault(message_id, Candidate(message_id)), cosines, scale)
                found[message_id].lanes.add("vector")
        best = max((h.bm25 for h in hits), default=0.0)
        for hit in (h for h in hits if h.message_id not in skip):
            candidate = found.setdefault(hit.message_id, Candidate(hit.message_id))
            candidate.lanes.add("keyword")
            candidate.bm25 = hit.bm25
            candidate.keyword = hit.bm25 / best if best > 0 else 0.0
        if vectors is not None and self.index is not None:  # the keyword lane's hits the vector lane missed
            ids, rows = self.index.vectors([ident for ident, c in found.items() if c.cosine is None])
            for ident, cosines in zip(ids, rows @ _stacked(vectors).T, strict=True):
                _set_cosines(found[ident], cosines, scale)
        return found

    def _vector_lane(
        self, query: Query, scope: Scope, depth: int
    ) -> tuple[QueryVectors | None, list[tuple[int, Vectors]]]:
        """The query's vectors (None past the deadline) and their ``depth`` nearest messages in scope, each
        with its cosine to every query vector (``_stacked`` order)."""
        parts = self.embedding.embed_parts(query.parts)
        if parts is None:
            return None, []
        vectors = combine(query, parts)
        if self.index is None:
            return vectors, []
        return vectors, self.index.search_many(_stacked(vectors), scope, depth)

    def _choose(
        self,
        conn: Any,
        request: AssembleInput,
        result: AssembleResult,
        found: dict[int, Candidate],
        window_keys: set[str],
        room: int,
    ) -> tuple[list[tuple[Candidate, str]], dict[int, StoredMessage], int]:
        """Score every candidate and keep the best that fit; returns them, the messages read, the room left."""
        if not found:
            return [], {}, room
        stored = self.ops.messages.fetch(conn, list(found))
        pairs = query_pairs(result.keyword_terms)
        for candidate in found.values():
            message = stored.get(candidate.message_id)
            if message is None:
                candidate.decision = "missing"
                continue
            if not message.text.strip():  # all injected (capture/injected.py): stored, never recalled
                candidate.decision = "no_text"
                continue
            age = (request.now - message.created_at) / 3600
            if pairs and candidate.keyword:
                candidate.keyword_coverage = pair_coverage(result.keyword_terms, message.text, pairs)
            score(
                candidate,
                role=message.role,
                importance_score=message.importance,
                age_hours=age,
                half_life_hours=request.settings.recency_decay_hours,
                recency_floor=request.settings.recency_floor,
                lanes=result.lanes_ran,
            )
            if message.window_key in window_keys:
                candidate.decision = "in_window"
            elif max(candidate.similarity, candidate.prompt_similarity or 0.0) < request.settings.min_similarity:
                candidate.decision = "below_min_similarity"
        question = when.TimeQuestion.of(self.clean(request.prompt or ""), request.now)
        when.weigh(conn, self.ops.message_days, question, found.values(), stored, request.settings.recall_time_boost)
        ranked, sources = _in_turn(found.values(), request.settings.min_similarity)
        chosen: list[tuple[Candidate, str]] = []
        memory_room = memory_share = int(request.settings.memory_file_share * room)  # the memory files' share
        distinct = _Distinct(self.index, request.settings.recall_duplicate_cosine)
        for candidate in ranked:
            if candidate.decision != "considered":
                continue
            if len(chosen) >= request.settings.retrieval_count:
                candidate.decision = "over_count"
                continue
            if distinct.repeats(candidate.message_id):
                candidate.decision = "near_duplicate"
                continue
            text = render.line(stored[candidate.message_id], request.recalled_text_chars)
            cost = render.estimate_tokens(text) + 1
            from_file = stored[candidate.message_id].kind == MEMORY_KIND
            if from_file and memory_room == memory_share:  # the first memory-file line brings the block's note
                cost += render.files_note_tokens()
            if cost > room or (from_file and cost > memory_room):
                candidate.decision = "over_memory_share" if cost <= room else "over_budget"
                continue
            room -= cost
            memory_room -= cost if from_file else 0
            candidate.decision = "kept"
            candidate.chosen_by = sources.get(candidate.message_id)
            chosen.append((candidate, text))
            distinct.keep(candidate.message_id)
        result.candidates = ranked
        return chosen, stored, room

    def _neighbours(
        self,
        conn: Any,
        request: AssembleInput,
        result: AssembleResult,
        scope: Scope,
        chosen: list[tuple[Candidate, str]],
        stored: dict[int, StoredMessage],
        window_keys: set[str],
        room: int,
    ) -> None:
        """Add the kept hits' neighbours to ``chosen`` while the room lasts, each traced with its hit.

        One batched lookup for all hits (``messages.neighbours``). A neighbour is never a second copy of a
        hit or of another neighbour, never a message the host's window holds, and never outside the scope.
        """
        radius = request.settings.neighbour_radius
        # A memory-file chunk stands on its own: its neighbours are other paragraphs, not a conversation's turns.
        hits = [candidate.message_id for candidate, _ in chosen if stored[candidate.message_id].kind != MEMORY_KIND]
        rows = self.ops.messages.neighbours(conn, [(i, stored[i].session_rowid) for i in hits], radius, scope)
        around: dict[int, list[Neighbour]] = {}
        for row in rows:
            around.setdefault(row.anchor, []).append(row)
        by_id = {candidate.message_id: candidate for candidate in result.candidates}
        taken = set(hits)
        for anchor in hits:
            for row in _nearest_first(anchor, around.get(anchor, [])):
                ident = row.message.id
                if ident in taken or not row.message.text.strip():
                    continue
                candidate = by_id.get(ident)
                if candidate is None:
                    candidate = by_id[ident] = Candidate(ident)
                    result.candidates.append(candidate)
                elif candidate.decision == "in_window":
                    continue
                candidate.lanes.add("neighbour")
                candidate.neighbour_of = f"msg:{anchor}"
                if row.message.window_key in window_keys:
                    candidate.decision = "in_window"
                    continue
                text = render.line(row.message, request.recalled_text_chars)
                cost = render.estimate_tokens(text) + 1
                if cost > room:
                    candidate.decision = "over_budget"
                    continue
                room -= cost
                taken.add(ident)
                stored[ident] = row.message
                candidate.decision = "neighbour"
                chosen.append((candidate, text))

    @staticmethod
    def _render(result: AssembleResult, chosen: list[tuple[Candidate, str]], stored: dict[int, StoredMessage]) -> None:
        if not chosen:
            return
        chosen.sort(key=lambda pair: (stored[pair[0].message_id].created_at, pair[0].message_id))
        files = any(stored[candidate.message_id].kind == MEMORY_KIND for candidate, _ in chosen)
        result.system_prompt_addition = render.block([text for _, text in chosen], files=files)
        result.estimated_tokens = result.window_tokens + render.estimate_tokens(result.system_prompt_addition)
        for candidate, _ in chosen:
            message = stored[candidate.message_id]
            result.recalled.append(
                Recalled(
                    id=message.id,
                    citation=message.citation,
                    role=message.role,
                    created_at=message.created_at,
                    score=round(candidate.score, 6),
                    kind=message.kind,
                    neighbour_of=candidate.neighbour_of if candidate.decision == "neighbour" else None,
                )
            )


class _PhaseClock:
    """Laps of one assemble, in milliseconds: a clock read per phase, nothing else on the turn."""

    def __init__(self) -> None:
        self.last = time.perf_counter()

    def lap(self, result: AssembleResult, phase: str) -> None:
        now = time.perf_counter()
        result.phases[phase] = round((now - self.last) * 1000, 3)
        self.last = now


class _Distinct:
    """The near-duplicate step: a candidate whose vector is at least ``threshold`` cosine-similar to a hit
    already kept is left out (``near_duplicate``), so the block does not spend its room on the same fact said
    five times while the second fact a question needs waits below. Greedy in rank order, like MMR with its
    penalty taken to the limit above the threshold and zero below it: the best statement of each fact stays,
    and nothing is reordered. Off at ``threshold`` 1 (the default, ``recall_duplicate_cosine``); messages
    without a vector (still in the backlog, no index) are never judged duplicates.
    """

    def __init__(self, index: Nearest | None, threshold: float) -> None:
        self.index = index if threshold < 1.0 else None
        self.threshold = threshold
        self.kept: list[Vectors] = []

    def _unit(self, message_id: int) -> Vectors | None:
        vector = self.index.vector(message_id) if self.index is not None else None
        if vector is None:
            return None
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm > 0 else None

    def repeats(self, message_id: int) -> bool:
        if self.index is None or not self.kept:
            return False
        vector = self._unit(message_id)
        return vector is not None and float(np.max(np.stack(self.kept) @ vector)) >= self.threshold

    def keep(self, message_id: int) -> None:
        vector = self._unit(message_id) if self.index is not None else None
        if vector is not None:
            self.kept.append(vector)


def _stacked(vectors: QueryVectors) -> Vectors:
    """The query vectors the index is searched with: the prompt in context, then the prompt alone if apart."""
    rows = [vectors.context] if vectors.prompt is None else [vectors.context, vectors.prompt]
    return np.stack(rows)


def _set_cosines(candidate: Candidate, cosines: Vectors, scale: tuple[float, float] = (1.0, 0.0)) -> None:
    """The candidate's cosines on recall's scale (``model_files.cosine_scale``: identity but for e5)."""
    slope, intercept = scale
    calibrated = np.clip(cosines * slope + intercept, -1.0, 1.0) if scale != (1.0, 0.0) else cosines
    candidate.cosine = float(calibrated[0])
    if len(calibrated) > 1:
        candidate.prompt_cosine = float(calibrated[1])


def _in_turn(found: Iterable[Candidate], min_similarity: float) -> tuple[list[Candidate], dict[int, str]]:
    """Every candidate in the order the block takes them, and which ranking offered each that is eligible.

    Without a prompt ranking (no context, or no prompt) this is the ranking by score. With one, the two
    rankings take turns, the prompt's first and at least ``PROMPT_SHARE`` of the places its own, each
    candidate once: where they agree nothing changes, and where the context pulls elsewhere the prompt's
    own best matches still come first. The ineligible follow, by score, for the trace.
    """
    ranked = sorted(found, key=lambda c: (-c.score, c.message_id))
    by_prompt = [c for c in ranked if c.decision == "considered" and c.prompt_score is not None]
    if not by_prompt:
        return ranked, {}
    by_prompt = [c for c in by_prompt if (c.prompt_similarity or 0.0) >= min_similarity]
    by_prompt.sort(key=lambda c: (-(c.prompt_score or 0.0), c.message_id))
    by_context = [c for c in ranked if c.decision == "considered" and c.similarity >= min_similarity]
    order: dict[int, Candidate] = {}
    sources: dict[int, str] = {}
    queues = {"prompt": iter(by_prompt), "context": iter(by_context)}
    taken = {"prompt": 0, "context": 0}
    while queues:
        turn = "prompt" if "prompt" in queues and taken["prompt"] <= PROMPT_SHARE * len(order) else "context"
        turn = turn if turn in queues else next(iter(queues))
        candidate = next(queues[turn], None)
        if candidate is None:
            del queues[turn]
        elif candidate.message_id not in order:
            order[candidate.message_id] = candidate
            sources[candidate.message_id] = turn
            taken[turn] += 1
    return list(order.values()) + [c for c in ranked if c.message_id not in order], sources


def _stored_window(ops: Backend, conn: Any, session: SessionRef, keys: set[str]) -> frozenset[int]:
    """Ids of the stored messages the host's window holds.

    They are the session's newest (the window is the end of the history the host has, and the host commits
    every turn), so one short range of ``messages_by_session`` finds them whatever the history's size; a few
    more are read in case the host holds turns the store has not seen. Anything missed here is still caught
    by its window key when scored.
    """
    if session.rowid < 0 or not keys:
        return frozenset()
    newest = ops.messages.newest_window_keys(conn, session.rowid, len(keys) + WINDOW_SLACK)
    return frozenset(message_id for message_id, key in newest if key in keys)


def _nearest_first(anchor: int, rows: list[Neighbour]) -> list[Neighbour]:
    """A hit's neighbours by distance in its session (one before, one after, two before, ...)."""
    before = sorted((r for r in rows if r.message.id < anchor), key=lambda r: -r.message.id)
    after = sorted((r for r in rows if r.message.id > anchor), key=lambda r: r.message.id)
    ordered: list[Neighbour] = []
    for step in range(max(len(before), len(after))):
        ordered += [side[step] for side in (before, after) if step < len(side)]
    return ordered
