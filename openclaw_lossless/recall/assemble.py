"""Assembly: the recent window plus a Recalled Context block of the most relevant older messages.

1. Window: the newest host messages within ``windowShare × budget`` (``window.py``).
2. Query: the prompt plus the last three user messages of the window.
3. Candidates from the vector and keyword lanes, over the recall scope, minus what the window already holds.
4. Scoring (``scoring.py``): drop below ``minSimilarity``, rank the rest by the lanes' mean × recency × weight.
5. The best ``retrievalCount`` that fit the room: the rest of the host's budget, capped at
   ``recallTokenBudget`` for the whole block.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from openclaw_lossless.config import RecallSettings
from openclaw_lossless.embed.index import VectorIndex
from openclaw_lossless.embed.provider import Vectors
from openclaw_lossless.embed.service import EmbeddingService
from openclaw_lossless.recall import render
from openclaw_lossless.recall.scoring import Candidate, score
from openclaw_lossless.recall.search import fts_query, keyword_search
from openclaw_lossless.recall.window import Descriptor, query_parts, window_start
from openclaw_lossless.store import messages
from openclaw_lossless.store.connection import Connection
from openclaw_lossless.store.sessions import DEFAULT_AGENT, Scope, SessionRef, agent_of, find_session, recall_scope
from openclaw_lossless.store.term_stats import TermStats

LANE_DEPTH = 100
LANE_THREADS = 4  # vector lanes running at once, beside their requests' keyword lanes
WINDOW_SLACK = 8  # stored messages read past the window's size when finding the window's own


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


@dataclass
class AssembleResult:
    window_start: int
    window_tokens: int
    estimated_tokens: int
    system_prompt_addition: str
    recalled: list[dict[str, Any]] = field(default_factory=list)
    candidates: list[Candidate] = field(default_factory=list)
    skipped: str | None = None
    query: str = ""
    query_parts: list[str] = field(default_factory=list)
    lanes_ran: frozenset[str] = frozenset()

    def trace(self) -> list[dict[str, Any]]:
        return [asdict(c) | {"lanes": sorted(c.lanes), "citation": f"msg:{c.message_id}"} for c in self.candidates]


class Assembler:
    def __init__(self, index: VectorIndex | None, embedding: EmbeddingService, terms: TermStats | None = None) -> None:
        self.index = index
        self.embedding = embedding
        self.terms = terms
        # The vector lane (embed the query, scan the index) runs beside the keyword lane: onnxruntime, numpy and
        # SQLite all release the GIL, so on two cores a turn waits for the slower lane rather than for both.
        self._lanes = concurrent.futures.ThreadPoolExecutor(LANE_THREADS, thread_name_prefix="lossless-lane")

    def close(self) -> None:
        self._lanes.shutdown(wait=False, cancel_futures=True)

    def assemble(self, conn: Connection, request: AssembleInput) -> AssembleResult:
        deadline = time.monotonic() + request.deadline_s
        descriptors = request.descriptors
        start = window_start(descriptors, int(request.settings.window_share * request.token_budget))
        window = descriptors[start:]
        window_tokens = sum(d.tokens for d in window)
        result = AssembleResult(start, window_tokens, window_tokens, "")
        result.query_parts = query_parts(request.prompt, window)
        result.query = "\n".join(result.query_parts)
        room = request.token_budget - window_tokens
        if request.settings.recall_token_budget:
            room = min(room, request.settings.recall_token_budget)
        room -= render.frame_tokens()
        if request.settings.retrieval_count == 0 or room <= 0 or not result.query:
            result.skipped = "no_room" if room <= 0 else ("no_query" if not result.query else None)
            return result
        session = self._session(conn, request)
        scope = request.scope or recall_scope(conn, session, request.settings.recall_scope)
        window_keys = {d.key for d in window}
        candidates = self._candidates(conn, result, scope, deadline, skip=_stored_window(conn, session, window_keys))
        chosen, stored, room = self._choose(conn, request, result, candidates, window_keys, room)
        if request.settings.neighbour_radius and chosen:
            self._neighbours(conn, request, result, scope, chosen, stored, window_keys, room)
        self._render(result, chosen, stored)
        return result

    @staticmethod
    def _session(conn: Connection, request: AssembleInput) -> SessionRef:
        known = find_session(conn, request.session_id)
        if known is not None:
            return known
        agent = agent_of(request.session_key) if request.session_key else DEFAULT_AGENT
        return SessionRef(-1, request.session_id, request.session_key, agent)

    def search(
        self,
        conn: Connection,
        text: str,
        scope: Scope,
        k: int,
        mode: str,
        settings: RecallSettings,
        now: float,
        deadline_s: float,
    ) -> list[tuple[Candidate, messages.StoredMessage]]:
        """Ranked hits for an operator or agent query: the same lanes and score parts as recall."""
        probe = AssembleResult(0, 0, 0, "", query=text, query_parts=[text])
        found = self._candidates(conn, probe, scope, time.monotonic() + deadline_s, lanes=mode)
        stored = messages.fetch(conn, list(found))
        hits = []
        for candidate in found.values():
            message = stored.get(candidate.message_id)
            if message is None:
                continue
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
        hits.sort(key=lambda pair: (-pair[0].relevance * pair[0].weight, pair[0].message_id))
        return hits[:k]

    def _candidates(
        self,
        conn: Connection,
        result: AssembleResult,
        scope: Scope,
        deadline: float,
        lanes: str = "hybrid",
        skip: frozenset[int] = frozenset(),
    ) -> dict[int, Candidate]:
        """Each lane's best ``LANE_DEPTH`` in scope, ``skip`` (the window's messages) left out.

        The lanes reach ``len(skip)`` deeper so that a window full of matching messages cannot crowd the older
        matches out of them. Keyword scores stay relative to the best keyword hit, window or not.
        """
        found: dict[int, Candidate] = {}
        depth = LANE_DEPTH + len(skip)
        vector_lane = self._lanes.submit(self._vector_lane, result, scope, depth) if lanes != "keyword" else None
        try:
            keyword_depth = depth if lanes in ("hybrid", "keyword") else 0
            hits, timed_out = keyword_search(conn, result.query, scope, keyword_depth, deadline, self.terms), False
        except TimeoutError:
            hits, timed_out = [], True
        query_vector, nearest = vector_lane.result() if vector_lane is not None else (None, [])
        if timed_out:
            result.skipped = "keyword_deadline" if query_vector is not None else "deadline"
        ran = {"vector"} if query_vector is not None and self.index is not None else set()
        # The keyword lane ran if it found something, or (rarely asked) if the query had words to look for.
        if keyword_depth > 0 and not timed_out and (hits or fts_query(result.query) is not None):
            ran.add("keyword")
        result.lanes_ran = frozenset(ran)
        for message_id, cosine in nearest:
            if message_id not in skip:
                found.setdefault(message_id, Candidate(message_id)).lanes.add("vector")
                found[message_id].cosine = cosine
        best = max((h.bm25 for h in hits), default=0.0)
        for hit in (h for h in hits if h.message_id not in skip):
            candidate = found.setdefault(hit.message_id, Candidate(hit.message_id))
            candidate.lanes.add("keyword")
            candidate.bm25 = hit.bm25
            candidate.keyword = hit.bm25 / best if best > 0 else 0.0
            if candidate.cosine is None and query_vector is not None and self.index is not None:
                vector = self.index.vector(hit.message_id)
                candidate.cosine = None if vector is None else float(vector @ query_vector)
        return found

    def _vector_lane(
        self, result: AssembleResult, scope: Scope, depth: int
    ) -> tuple[Vectors | None, list[tuple[int, float]]]:
        """The query's vector (None past its deadline) and its ``depth`` nearest messages in scope."""
        query_vector = self.embedding.embed_query(result.query_parts or result.query)
        if query_vector is None or self.index is None:
            return query_vector, []
        return query_vector, self.index.search(query_vector, scope, depth)

    def _choose(
        self,
        conn: Connection,
        request: AssembleInput,
        result: AssembleResult,
        found: dict[int, Candidate],
        window_keys: set[str],
        room: int,
    ) -> tuple[list[tuple[Candidate, str]], dict[int, messages.StoredMessage], int]:
        """Score every candidate and keep the best that fit; returns them, the messages read, the room left."""
        if not found:
            return [], {}, room
        stored = messages.fetch(conn, list(found))
        keys = messages.window_keys(conn, list(found))
        for candidate in found.values():
            message = stored.get(candidate.message_id)
            if message is None:
                candidate.decision = "missing"
                continue
            age = (request.now - message.created_at) / 3600
            score(
                candidate,
                role=message.role,
                importance_score=message.importance,
                age_hours=age,
                half_life_hours=request.settings.recency_decay_hours,
                recency_floor=request.settings.recency_floor,
                lanes=result.lanes_ran,
            )
            if keys.get(candidate.message_id) in window_keys:
                candidate.decision = "in_window"
            elif candidate.similarity < request.settings.min_similarity:
                candidate.decision = "below_min_similarity"
        ranked = sorted(found.values(), key=lambda c: (-c.score, c.message_id))
        chosen: list[tuple[Candidate, str]] = []
        for candidate in ranked:
            if candidate.decision != "considered":
                continue
            if len(chosen) >= request.settings.retrieval_count:
                candidate.decision = "over_count"
                continue
            text = render.line(stored[candidate.message_id], request.recalled_text_chars)
            cost = render.estimate_tokens(text) + 1
            if cost > room:
                candidate.decision = "over_budget"
                continue
            room -= cost
            candidate.decision = "kept"
            chosen.append((candidate, text))
        result.candidates = ranked
        return chosen, stored, room

    @staticmethod
    def _neighbours(
        conn: Connection,
        request: AssembleInput,
        result: AssembleResult,
        scope: Scope,
        chosen: list[tuple[Candidate, str]],
        stored: dict[int, messages.StoredMessage],
        window_keys: set[str],
        room: int,
    ) -> None:
        """Add the kept hits' neighbours to ``chosen`` while the room lasts, each traced with its hit.

        One batched lookup for all hits (``messages.neighbours``). A neighbour is never a second copy of a
        hit or of another neighbour, never a message the host's window holds, and never outside the scope.
        """
        radius = request.settings.neighbour_radius
        hits = [candidate.message_id for candidate, _ in chosen]
        rows = messages.neighbours(conn, [(i, stored[i].session_rowid) for i in hits], radius, scope)
        around: dict[int, list[messages.Neighbour]] = {}
        for row in rows:
            around.setdefault(row.anchor, []).append(row)
        by_id = {candidate.message_id: candidate for candidate in result.candidates}
        taken = set(hits)
        for anchor in hits:
            for row in _nearest_first(anchor, around.get(anchor, [])):
                ident = row.message.id
                if ident in taken:
                    continue
                candidate = by_id.get(ident)
                if candidate is None:
                    candidate = by_id[ident] = Candidate(ident)
                    result.candidates.append(candidate)
                elif candidate.decision == "in_window":
                    continue
                candidate.lanes.add("neighbour")
                candidate.neighbour_of = f"msg:{anchor}"
                if row.window_key in window_keys:
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
    def _render(
        result: AssembleResult, chosen: list[tuple[Candidate, str]], stored: dict[int, messages.StoredMessage]
    ) -> None:
        if not chosen:
            return
        chosen.sort(key=lambda pair: (stored[pair[0].message_id].created_at, pair[0].message_id))
        result.system_prompt_addition = render.block([text for _, text in chosen])
        result.estimated_tokens = result.window_tokens + render.estimate_tokens(result.system_prompt_addition)
        for candidate, _ in chosen:
            message = stored[candidate.message_id]
            result.recalled.append(
                {
                    "id": message.id,
                    "citation": message.citation,
                    "role": message.role,
                    "createdAt": message.created_at,
                    "score": round(candidate.score, 6),
                    "kind": message.kind,
                    "neighbourOf": candidate.neighbour_of if candidate.decision == "neighbour" else None,
                }
            )


def _stored_window(conn: Connection, session: SessionRef, keys: set[str]) -> frozenset[int]:
    """Ids of the stored messages the host's window holds.

    They are the session's newest (the window is the end of the history the host has, and the host commits
    every turn), so one short range of ``messages_by_session`` finds them whatever the history's size; a few
    more are read in case the host holds turns the store has not seen. Anything missed here is still caught
    by its window key when scored.
    """
    if session.rowid < 0 or not keys:
        return frozenset()
    rows = conn.execute(
        "SELECT id, window_key FROM messages WHERE session_rowid = ? ORDER BY id DESC LIMIT ?",
        (session.rowid, len(keys) + WINDOW_SLACK),
    )
    return frozenset(int(row[0]) for row in rows if row[1] in keys)


def _nearest_first(anchor: int, rows: list[messages.Neighbour]) -> list[messages.Neighbour]:
    """A hit's neighbours by distance in its session (one before, one after, two before, ...)."""
    before = sorted((r for r in rows if r.message.id < anchor), key=lambda r: -r.message.id)
    after = sorted((r for r in rows if r.message.id > anchor), key=lambda r: r.message.id)
    ordered: list[messages.Neighbour] = []
    for step in range(max(len(before), len(after))):
        ordered += [side[step] for side in (before, after) if step < len(side)]
    return ordered
