"""Wire models of the answers that are not hooks: search, recovery, pack, snapshots, health, stats, identity,
the redaction rescan. camelCase on the wire, as docs/http-api.md documents them.

Why models and not dictionaries: the OpenAPI schema then states every answer (a client generated from it,
the fuzzer's conformance check and the CLI and MCP server all read the same shape). Where an answer carries
an open-ended part (a recall trace's score parts, catch-up's report, the last archiving, counters by name) the
part stays an object with free keys rather than a schema the code does not keep.

Numbers keep the type they were made with: a count is an integer, a time or a score a float, and where either
may come (a back-off delay, a counter) the field says ``int | float`` so an integer is never re-sent as ``1.0``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openclaw_lossless.api.schemas import RecalledItem

Number = int | float


class Out(BaseModel):
    """Read from the wire's dictionaries or from the dataclasses ``store/`` and ``service/`` return alike."""

    model_config = ConfigDict(populate_by_name=True, from_attributes=True)


class Open(Out):
    """A part whose keys are not fixed: what is known is stated, anything else passes through as it came."""

    model_config = ConfigDict(populate_by_name=True, from_attributes=True, extra="allow")


def wire(model: type[BaseModel], value: object) -> dict[str, Any]:
    """``value`` exactly as the HTTP API answers it: what the CLI and the MCP server show when they read the
    store themselves, so an answer has one shape whether a running sidecar or the file gave it."""
    answer: dict[str, Any] = model.model_validate(value).model_dump(by_alias=True)
    return answer


# -- search, recovery, a cited message ----------------------------------------------------------------------


class SearchHit(Out):
    id: int
    citation: str = Field(description="msg:<id>: what /v1/messages/{id} and lossless_recover take.")
    role: str
    kind: str
    created_at: float = Field(alias="createdAt", description="Epoch seconds.")
    session_id: str | None = Field(alias="sessionId")
    agent_id: str = Field(alias="agentId")
    text: str
    score: float = Field(description="relevance x the role and kind weight: the order of the hits.")
    relevance: float
    similarity: float
    cosine: float | None = Field(description="Vector lane's cosine, null when the vector lane did not find it.")
    keyword: float | None = Field(description="Keyword lane's normalised BM25, null when it did not find it.")
    lanes: list[str]


class SearchResponse(Out):
    query: str
    scope: str
    mode: str
    source: str = Field("all", description="'all', or the one source searched: 'memory' or 'messages'.")
    hits: list[SearchHit]
    lanes_ran: list[str] = Field(
        alias="lanesRan", description="The lanes the hits were drawn from: 'keyword', 'vector' or both."
    )
    skipped: str | None = Field(
        description="Why a lane gave no hits although asked: 'keyword_deadline' (the keyword lane ran out of"
        " time; the hits are the vector lane's), 'deadline' (no lane answered: no hits does not mean no match)"
        " or 'vector_unavailable' (a model is configured but is unavailable or did not embed the query in time:"
        " the hits are the keyword lane's)."
    )


class StoredMessageView(Out):
    """One stored message as recovery shows it: its text as recalled and the host's original, verbatim."""

    id: int
    citation: str
    role: str
    kind: str
    created_at: float = Field(alias="createdAt")
    text: str
    original: Any = Field(description="The host's message exactly as it was sent.")
    importance: float | None
    importance_label: str | None = Field(alias="importanceLabel")
    cites: str | None = Field(description="msg:<id> of the message this one quotes, if any.")


class SessionOf(Out):
    session_id: str = Field(alias="sessionId")
    session_key: str | None = Field(alias="sessionKey")
    agent_id: str = Field(alias="agentId")


class RecoverResponse(SessionOf):
    up_to: str | None = Field(alias="upTo", description="msg:<id> the messages end at, when one was named.")
    messages: list[StoredMessageView]


class MessageResponse(SessionOf):
    message: StoredMessageView
    before: list[StoredMessageView]
    after: list[StoredMessageView]


# -- pack and snapshots -------------------------------------------------------------------------------------


class PackItem(RecalledItem):
    text: str


class PackTrace(Open):
    query: str = Field(description="What was searched for.")
    candidates: list[dict[str, Any]] = Field(description="Every candidate's score parts and decision.")


class PackResponse(Out):
    query: str
    budget_tokens: int = Field(alias="budgetTokens")
    estimated_tokens: int = Field(alias="estimatedTokens")
    items: list[PackItem]
    block: str = Field(description="The Recalled Context block, each line cited [msg:<id>].")
    recall_skipped: str | None = Field(alias="recallSkipped")
    trace: PackTrace


class SnapshotView(Out):
    name: str
    session_id: str = Field(alias="sessionId")
    session_key: str | None = Field(alias="sessionKey")
    last_message_id: int | None = Field(alias="lastMessageId")
    created_at: float = Field(alias="createdAt")
    automatic: bool = Field(description="Made by the sidecar before a compaction (pre-compaction-N).")
    compaction_id: int | None = Field(alias="compactionId")


class SnapshotMadeView(Out):
    """``snapshot create``: the name, and the session and last message it marks."""

    name: str
    session_id: str = Field(alias="sessionId")
    last_message_id: int | None = Field(alias="lastMessageId")


class SnapshotsResponse(Out):
    snapshots: list[SnapshotView]


# -- health and stats ---------------------------------------------------------------------------------------


class DatabaseHealth(Out):
    writable: bool
    problem: str | None
    backend: Literal["sqlite", "postgresql"] = Field(description="The store the sidecar is on.")
    vector_extension: str | None = Field(
        alias="vectorExtension", description="`sqlite-vec v0.1.6` or `pgvector 0.8.1`; null when unreadable."
    )


class WorkerView(Out):
    embedded: int
    failures: int
    last_error: str | None = Field(alias="lastError")
    backoff_s: Number = Field(alias="backoffS")
    drain_rate_per_s: Number = Field(alias="drainRatePerS")


class EmbedderView(Out):
    configured: str
    active: str | None
    model: str | None
    variant: str | None
    dimension: int | None
    ready: bool
    reason: str | None
    fallbacks: dict[str, int]
    rebuilding: bool
    rebuilt_from: str | None = Field(alias="rebuiltFrom")
    worker: WorkerView | None
    api: dict[str, Any] | None = Field(description="An API provider's requests, retries and failures by kind.")


class IndexView(Out):
    loaded: bool
    vectors: int
    searches_while_loading: int = Field(alias="searchesWhileLoading")


class AgentTimes(Out):
    last_commit_at: str | None = Field(alias="lastCommitAt")
    last_assemble_at: str | None = Field(alias="lastAssembleAt")


class CatchUpBriefView(Out):
    state: Literal["off", "idle", "running"]
    last_run_at: str | None = Field(alias="lastRunAt")
    last_error: str | None = Field(alias="lastError")
    pending: int = Field(description="Sessions and agents queued for catch-up.")
    watching: list[str] = Field(
        default_factory=list, description="Watch mode's sources (openclaw, claude-code); empty: not watching."
    )


class CatchUpView(Out):
    state: Literal["off", "idle", "running"]
    last_run_at: str | None = Field(alias="lastRunAt")
    last_error: str | None = Field(alias="lastError")
    last_imported: int = Field(alias="lastImported")
    total_imported: int = Field(alias="totalImported")
    pending: int
    runs: int
    watching: list[str] = Field(
        default_factory=list, description="Watch mode's sources (openclaw, claude-code); empty: not watching."
    )


class HealthResponse(Out):
    """``/healthz``, 200 (``ok``, ``degraded``) and 503 (``unavailable``) alike."""

    status: Literal["ok", "degraded", "unavailable"]
    version: str
    pid: int
    database: DatabaseHealth
    sqlite_vec: str | None = Field(alias="sqliteVec")
    embedder: EmbedderView
    backlog: int | None
    vector_index: IndexView | None = Field(alias="vectorIndex")
    agents: dict[str, AgentTimes]
    catch_up: CatchUpBriefView = Field(alias="catchUp")


class DatabaseStats(Out):
    path: str
    bytes: int
    used_bytes: int = Field(alias="usedBytes")
    max_db_size_mb: Number = Field(alias="maxDbSizeMb")


class PrunedView(Out):
    """What an archiving did (``prune``; ``/stats`` archive.last)."""

    pruned: int = Field(description="Messages archived and removed from the store.")
    archives: list[str] = Field(description="The archive files written.")
    last_message_id: int | None = Field(alias="lastMessageId", description="The newest message archived.")
    skipped: str | None = Field(
        None, description="Why this round archived nothing (another sidecar sharing the store was archiving)."
    )


class WouldPruneView(Out):
    """What an archiving would do (``prune --dry-run``)."""

    pruned: int = Field(description="Messages that would be archived.")
    used_bytes: int = Field(alias="usedBytes")
    dry_run: Literal[True] = Field(True, alias="dryRun")


class ArchivingView(PrunedView):
    at: float = Field(description="When it ran (epoch seconds).")


class ArchiveStats(Out):
    archived_messages: int = Field(alias="archivedMessages")
    archives: int
    last: ArchivingView | None = Field(description="The last archiving since the start, if any.")


class LatencyView(Out):
    count: int
    p50_ms: float = Field(alias="p50Ms")
    p95_ms: float = Field(alias="p95Ms")
    p99_ms: float = Field(alias="p99Ms")


class KeywordPairsView(Out):
    done: int = Field(description="Messages read so far by the backfill.")
    total: int = Field(description="Messages the backfill reads: those stored before the keyword pairs.")


class StatsResponse(Out):
    version: str
    uptime_s: float = Field(alias="uptimeS")
    messages: int
    sessions: int
    agents: int
    turns: int
    compactions: int
    compaction_failures: int = Field(alias="compactionFailures")
    compaction_outcomes: dict[str, int] = Field(alias="compactionOutcomes")
    snapshots: int
    forgotten: int
    subagents: int
    vectors: int
    vector_index: IndexView | None = Field(alias="vectorIndex")
    backlog: int
    embedder: EmbedderView
    database: DatabaseStats
    archive: ArchiveStats
    latency: dict[str, LatencyView]
    recall_skips: dict[str, int] = Field(alias="recallSkips")
    counters: dict[str, Number]
    agent_activity: dict[str, AgentTimes] = Field(alias="agentActivity")
    catch_up: CatchUpView = Field(alias="catchUp")
    keyword_pairs: KeywordPairsView | None = Field(
        None,
        alias="keywordPairs",
        description="While messages stored before the keyword index held pairs of characters wait for them: how"
        " far the background backfill has come; null when none waits.",
    )


# -- identity and the redaction rescan ----------------------------------------------------------------------


class IdentityResponse(Out):
    service: str
    version: str
    pid: int
    store: str | None = Field(description="Which database file is served (a digest), null when it has none.")
    proof: str = Field(description="hex HMAC-SHA256 of the challenge, keyed with the token.")


class RescanResponse(Out):
    dry_run: bool = Field(alias="dryRun")
    resumed: bool = Field(description="Whether an interrupted rescan was continued.")
    kinds: dict[str, int] = Field(description="Placeholders added, by kind.")
    places: dict[str, int] = Field(description="Items changed, by place.")
    requeued: int = Field(description="Messages whose vectors are made again.")
    identities: int
    changed: int
