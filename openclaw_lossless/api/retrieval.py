"""Query endpoints for operators, tools and agents: hybrid search with citations, and session recovery."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from openclaw_lossless.api.deps import QueriesDep
from openclaw_lossless.api.responses import (
    MessageResponse,
    PackResponse,
    RecoverResponse,
    SearchResponse,
    SnapshotsResponse,
)

router = APIRouter(prefix="/v1", tags=["query"])


@router.get("/search")
def search(
    queries: QueriesDep,
    q: Annotated[str, Query(min_length=1, max_length=20_000, description="What to look for, in plain words.")],
    scope: Annotated[
        str, Query(max_length=600, description="'all', 'agent:<agentId>' or 'session:<sessionId>'.")
    ] = "all",
    k: Annotated[int, Query(ge=1, le=200)] = 10,
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid",
    source: Annotated[
        Literal["all", "memory", "messages"],
        Query(description="'memory': the workspace memory files only; 'messages': the conversation only."),
    ] = "all",
) -> SearchResponse:
    """The best hits, and which lanes they came from: a lane out of time says so (``skipped``)."""
    return SearchResponse.model_validate(queries.search(q, scope, k, mode, source))


@router.get("/sessions/{session_id}/messages", response_model=RecoverResponse)
def recover(
    queries: QueriesDep,
    session_id: Annotated[str, Path(min_length=1, max_length=512)],
    last: Annotated[int, Query(ge=1, le=10_000)] = 50,
) -> JSONResponse:
    """Originals are returned exactly; one holding a lone surrogate (legal in JavaScript) is sent escaped."""
    return escaped(RecoverResponse.model_validate(queries.recover(session_id, last)))


@router.get("/messages/{message_id}", response_model=MessageResponse)
def message(
    queries: QueriesDep,
    message_id: Annotated[int, Path(ge=1, le=2**62, description="The N of a citation msg:N.")],
    context: Annotated[int, Query(ge=0, le=50, description="Messages of its session to show either side.")] = 3,
) -> JSONResponse:
    """What a citation points at, whole and in its place: what the agents' ``lossless_recover`` tool reads."""
    return escaped(MessageResponse.model_validate(queries.message(message_id, context)))


class EscapedJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def escaped(answer: BaseModel) -> EscapedJSONResponse:
    """The answer as its model names it on the wire, sent with every non-ASCII character escaped."""
    return EscapedJSONResponse(answer.model_dump(by_alias=True))


@router.get("/pack")
def pack(
    queries: QueriesDep,
    q: Annotated[str, Query(min_length=1, max_length=20_000)],
    budget_tokens: Annotated[int, Query(alias="budgetTokens", ge=100, le=1_000_000)] = 2000,
    scope: Annotated[str, Query(max_length=600)] = "all",
    k: Annotated[int | None, Query(ge=1, le=200)] = None,
) -> PackResponse:
    """The bounded context bundle for a query, each item cited ``msg:<id>``, with the full trace."""
    return PackResponse.model_validate(queries.pack(q, budget_tokens, scope, k))


@router.get("/snapshots")
def snapshots(queries: QueriesDep) -> SnapshotsResponse:
    return SnapshotsResponse.model_validate({"snapshots": queries.snapshots()})
