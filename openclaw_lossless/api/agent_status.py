"""Per-agent status for the ``/lossless`` chat command: what is stored, what was recalled last, and why.

Both endpoints need the token: they name sessions and quote recalled (redacted) history. An agent id that
is not one (``agent:<agentId>:...`` names them) is refused with 422, one the store has never seen and that
has not assembled since the start with 404, both in the error shape.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field

from openclaw_lossless import __version__
from openclaw_lossless.api.deps import ActivityDep, EmbeddingDep, SidecarDep, StoreDep
from openclaw_lossless.api.responses import CatchUpView
from openclaw_lossless.api.schemas import RecalledItem
from openclaw_lossless.errors import BadRequest, NotFound
from openclaw_lossless.observe.activity import Activity, iso
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import Store
from openclaw_lossless.transcripts.catchup import CatchUp
from openclaw_lossless.transcripts.catchup_report import CatchUpReport

router = APIRouter(prefix="/v1/agents", tags=["agents"])

AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")


class Out(BaseModel):
    model_config = ConfigDict(populate_by_name=True, from_attributes=True)


class RecallSummary(Out):
    at: str = Field(description="When the assemble ran (ISO-8601 UTC).")
    session_id: str = Field(alias="sessionId")
    lines: int = Field(description="Lines in the Recalled Context block: hits plus their neighbours.")
    hits: int
    neighbours: int
    estimated_tokens: int = Field(alias="estimatedTokens")
    recall_skipped: str | None = Field(alias="recallSkipped", description="Why nothing was searched, if so.")


class RecallDetail(RecallSummary):
    block: str = Field(description="The Recalled Context block handed to the host ('' when nothing was recalled).")
    recalled: list[RecalledItem]
    window_tokens: int = Field(alias="windowTokens")
    lanes: list[str] = Field(description="The search lanes that ran: vector, keyword.")
    decisions: dict[str, int] = Field(description="Candidates per decision: kept, neighbour, over_budget, ...")
    trace: list[dict[str, Any]] = Field(description="Every candidate's score parts and decision, best first.")


class EmbedderSummary(Out):
    active: str | None
    model: str | None
    ready: bool
    reason: str | None


class AgentStatusResponse(Out):
    agent_id: str = Field(alias="agentId")
    version: str
    messages: int = Field(description="Messages stored for this agent.")
    sessions: int
    last_commit_at: str | None = Field(alias="lastCommitAt")
    last_assemble_at: str | None = Field(alias="lastAssembleAt")
    last_recall: RecallSummary | None = Field(alias="lastRecall")
    backlog: int = Field(description="Messages of every agent still waiting for their vectors.")
    embedder: EmbedderSummary
    catch_up: CatchUpView | None = Field(None, alias="catchUp", description="/stats catchUp, when present.")


class LastRecallResponse(Out):
    agent_id: str = Field(alias="agentId")
    recall: RecallDetail | None = Field(description="null until this agent's first assemble since the start.")


# The pattern is stated in the schema only (``_known`` checks it, with its own message).
AgentIdParam = Annotated[
    str,
    Path(
        min_length=1,
        max_length=128,
        description="The agent id of agent:<agentId>:...",
        json_schema_extra={"pattern": AGENT_ID.pattern},
    ),
]


@router.get("/{agent_id}/status", response_model=AgentStatusResponse, response_model_by_alias=True)
def status(
    sidecar: SidecarDep,
    store: StoreDep,
    activity: ActivityDep,
    embedding: EmbeddingDep,
    agent_id: AgentIdParam,
) -> dict[str, Any]:
    """What ``/lossless`` shows: messages stored, last commit/assemble and recall, backlog, embedder."""
    messages, sessions = _known(store, activity, agent_id)
    last_commit, last_assemble, recall = activity.agent(agent_id)
    embedder = embedding.status
    return {
        "agentId": agent_id,
        "version": __version__,
        "messages": messages,
        "sessions": sessions,
        "lastCommitAt": iso(last_commit),
        "lastAssembleAt": iso(last_assemble),
        "lastRecall": recall.summary() if recall is not None else None,
        "backlog": store.ops.backlog.size(store.db.reader()),
        "embedder": {
            "active": embedder.active,
            "model": embedder.model,
            "ready": embedder.ready,
            "reason": embedder.reason,
        },
        "catchUp": _catch_up(sidecar),
    }


@router.get("/{agent_id}/last-recall", response_model=LastRecallResponse, response_model_by_alias=True)
def last_recall(store: StoreDep, activity: ActivityDep, agent_id: AgentIdParam) -> dict[str, Any]:
    """The last assemble's Recalled Context block and its trace: what was kept and why, what was dropped."""
    _known(store, activity, agent_id)
    recall = activity.agent(agent_id)[2]
    return {"agentId": agent_id, "recall": recall.detail() if recall is not None else None}


def _known(store: Store, activity: Activity, agent_id: str) -> tuple[int, int]:
    """The agent's stored messages and sessions; 422 for a malformed id, 404 for one never seen."""
    if not AGENT_ID.match(agent_id):
        raise BadRequest(
            f"agent id must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit "
            f"(the <agentId> of a session key agent:<agentId>:...), got {agent_id[:80]!r}"
        )
    conn = store.db.reader()
    sessions = store.ops.agents.session_count(conn, agent_id)
    if not sessions and all(part is None for part in activity.agent(agent_id)):
        raise NotFound(
            f"no agent {agent_id!r} in the store: it has stored no message and not assembled since the sidecar "
            "started ('openclaw-lossless stats' lists the agents; 'openclaw-lossless import --agent "
            f"{agent_id}' brings in its existing history)"
        )
    messages = store.ops.agents.message_count(conn, agent_id)
    return messages, sessions


def _catch_up(sidecar: Sidecar) -> CatchUpReport | None:
    """The catch-up import's state as ``/stats`` shows it (``catchUp``), without the rest of ``/stats``."""
    catch_up = getattr(sidecar, "catch_up", None)
    return catch_up.view() if isinstance(catch_up, CatchUp) else None
