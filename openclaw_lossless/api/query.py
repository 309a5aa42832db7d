"""Query endpoints for operators, tools and agents: hybrid search with citations, and session recovery."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from fastapi.responses import JSONResponse

from openclaw_lossless.api.deps import QueriesDep

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
) -> dict[str, Any]:
    return {"query": q, "scope": scope, "mode": mode, "hits": queries.search(q, scope, k, mode)}


@router.get("/sessions/{session_id}/messages")
def recover(
    queries: QueriesDep,
    session_id: Annotated[str, Path(min_length=1, max_length=512)],
    last: Annotated[int, Query(ge=1, le=10_000)] = 50,
) -> JSONResponse:
    """Originals are returned exactly; one holding a lone surrogate (legal in JavaScript) is sent escaped."""
    return EscapedJSONResponse(queries.recover(session_id, last))


@router.get("/messages/{message_id}")
def message(
    queries: QueriesDep,
    message_id: Annotated[int, Path(ge=1, le=2**62, description="The N of a citation msg:N.")],
    context: Annotated[int, Query(ge=0, le=50, description="Messages of its session to show either side.")] = 3,
) -> JSONResponse:
    """What a citation points at, whole and in its place: what the agents' ``lossless_recover`` tool reads."""
    return EscapedJSONResponse(queries.message(message_id, context))


class EscapedJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode("ascii")


@router.get("/pack")
def pack(
    queries: QueriesDep,
    q: Annotated[str, Query(min_length=1, max_length=20_000)],
    budget_tokens: Annotated[int, Query(alias="budgetTokens", ge=100, le=1_000_000)] = 2000,
    scope: Annotated[str, Query(max_length=600)] = "all",
    k: Annotated[int | None, Query(ge=1, le=200)] = None,
) -> dict[str, Any]:
    """The bounded context bundle for a query, each item cited ``msg:<id>``, with the full trace."""
    return queries.pack(q, budget_tokens, scope, k)


@router.get("/snapshots")
def snapshots(queries: QueriesDep) -> dict[str, Any]:
    return {"snapshots": queries.snapshots()}
