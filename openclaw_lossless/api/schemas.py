"""Wire models: one ``...Request``/``...Response`` pair per hook, camelCase on the wire as the host speaks.

Messages stay plain JSON objects here (``dict``): the host's AgentMessage has many shapes and we keep the
original verbatim; capture (``capture/records.py``) decides what is acceptable and says why when it is not.

The rules those later checks enforce on names (session keys, printable identifiers, a message's role) are
also stated in the OpenAPI schema, as ``pattern``/``required`` only (``json_schema_extra``): the checks
themselves stay where they are, with their own error codes and messages. A client generated from the
schema, or a fuzzer, then knows what a request that can succeed looks like.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from openclaw_lossless.capture.records import check_depth
from openclaw_lossless.config import RecallOverrides
from openclaw_lossless.errors import BadRequest

MAX_MESSAGES = 20_000
# Every integer that may reach SQLite (a signed 64-bit column) stays inside it. The bound is JavaScript's
# Number.MAX_SAFE_INTEGER (the host cannot send a larger integer exactly), which also survives the OpenAPI
# schema as written: FastAPI states bounds as floats, and 2**62 printed as one (4.611686018427388e+18) reads
# back as an integer above the bound itself, so the fuzzer's schema-valid maximum was refused.
MAX_INT = 2**53 - 1


# What ``store/model/sessions.py`` (``check_identifier``, ``agent_of``) and ``capture/records.py`` (``_ROLE``)
# accept: no control characters, a key of ``agent:<agentId>:<name>`` whose name starts with no whitespace,
# a role of letters, digits, _ and -. Written in the part of regex syntax JSON Schema (ECMA-262) and Python
# read alike: no ``\s`` (the two disagree on U+0085 and U+FEFF), so the whitespace Python's ``\S`` excludes
# is listed. Those checks also refuse lone surrogates (SQLite cannot store them as UTF-8), which a pattern
# cannot state portably: engines in Unicode mode, schemathesis' among them, reject a surrogate range and then
# ignore the whole pattern.
PRINTABLE_PATTERN = r"^[^\x00-\x1f]+$"
_NO_SPACE = r"[^\x00-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]"
SESSION_KEY_PATTERN = rf"^agent:[A-Za-z0-9][A-Za-z0-9_.\-]{{0,127}}:{_NO_SPACE}[^\x00-\x1f]*$"
ROLE_PATTERN = r"^[A-Za-z][A-Za-z0-9_\-]{0,63}$"

# An identifier the store keeps (a session id, an advancement key): 1-512 printable characters.
Identifier = Annotated[str, Field(min_length=1, max_length=512, json_schema_extra={"pattern": PRINTABLE_PATTERN})]
# ``agent:<agentId>:<name>``: the agent id is read from it, so every write refuses a key without one.
SessionKey = Annotated[str, Field(min_length=1, max_length=512, json_schema_extra={"pattern": SESSION_KEY_PATTERN})]


def _shallow(message: dict[str, Any]) -> dict[str, Any]:
    try:
        check_depth(message)
    except BadRequest as exc:
        raise ValueError(exc.message) from exc
    return message


# A host message, kept as plain JSON; only its depth is bounded here (capture judges the rest, the role first).
AgentMessage = Annotated[
    dict[str, Any],
    AfterValidator(_shallow),
    Field(
        json_schema_extra={"required": ["role"], "properties": {"role": {"type": "string", "pattern": ROLE_PATTERN}}}
    ),
]


class Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable, machine-readable: what callers branch on.")
    message: str = Field(description="What went wrong and what to fix, for people.")


class ErrorResponse(BaseModel):
    """The one shape of every error the sidecar answers (see errors.py for the codes)."""

    error: ErrorDetail


class SessionFields(Wire):
    session_id: Identifier = Field(alias="sessionId")
    session_key: SessionKey | None = Field(None, alias="sessionKey")


class BootstrapRequest(SessionFields):
    pass


class BootstrapResponse(Wire):
    bootstrapped: bool
    imported_messages: int = Field(alias="importedMessages")
    reason: str | None = None


class DescriptorIn(Wire):
    role: str = Field(min_length=1, max_length=64)
    key: str = Field(min_length=1, max_length=128)
    tokens: int = Field(ge=0, le=10_000_000)
    timestamp: float | None = Field(None, allow_inf_nan=False)
    text: str | None = Field(None, max_length=200_000)


class AssembleRequest(SessionFields):
    # ``one_history`` below, as the schema states it: never both as lists.
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["messages", "descriptors"],
                "properties": {"messages": {"type": "array"}, "descriptors": {"type": "array"}},
            }
        }
    )
    messages: list[AgentMessage] | None = Field(None, max_length=MAX_MESSAGES)
    descriptors: list[DescriptorIn] | None = Field(None, max_length=MAX_MESSAGES)
    prompt: str | None = Field(None, max_length=1_000_000)
    token_budget: int | None = Field(None, alias="tokenBudget", ge=1, le=100_000_000)
    trace: bool = False
    config: RecallOverrides | None = None
    now: float | None = Field(
        None, allow_inf_nan=False, description="Epoch milliseconds to score recency against (default: now)."
    )

    @model_validator(mode="after")
    def one_history(self) -> AssembleRequest:
        if self.messages is not None and self.descriptors is not None:
            raise ValueError("send either 'messages' or 'descriptors', not both")
        return self


class RecalledItem(Wire):
    # Read from the assembler's ``Recalled`` lines: the wire names them here, not in recall/.
    model_config = ConfigDict(populate_by_name=True, extra="ignore", from_attributes=True)

    id: int
    citation: str
    role: str
    created_at: float = Field(alias="createdAt")
    score: float
    kind: str
    neighbour_of: str | None = Field(None, alias="neighbourOf")


class AssembleResponse(Wire):
    window_start: int = Field(alias="windowStart")
    messages: list[dict[str, Any]] | None = None
    estimated_tokens: int = Field(alias="estimatedTokens")
    system_prompt_addition: str = Field(alias="systemPromptAddition")
    recalled: list[RecalledItem]
    recall_skipped: str | None = Field(None, alias="recallSkipped")
    trace: dict[str, Any] | None = None


class CommitTurnRequest(SessionFields):
    advancement_key: Identifier = Field(alias="advancementKey")
    messages: list[AgentMessage] = Field(max_length=MAX_MESSAGES)
    is_heartbeat: bool = Field(False, alias="isHeartbeat")
    config: RecallOverrides | None = None


class CommitTurnResponse(Wire):
    status: Literal["committed", "duplicate"]
    stored: int
    skipped_heartbeat: bool = Field(alias="skippedHeartbeat")


class IngestRequest(SessionFields):
    message: AgentMessage
    is_heartbeat: bool = Field(False, alias="isHeartbeat")
    config: RecallOverrides | None = None


class IngestResponse(Wire):
    ingested: bool


class IngestBatchRequest(SessionFields):
    messages: list[AgentMessage] = Field(max_length=MAX_MESSAGES)
    is_heartbeat: bool = Field(False, alias="isHeartbeat")
    config: RecallOverrides | None = None


class AfterTurnRequest(IngestBatchRequest):
    pre_prompt_message_count: int | None = Field(None, alias="prePromptMessageCount", ge=0, le=MAX_INT)


class IngestBatchResponse(Wire):
    ingested_count: int = Field(alias="ingestedCount")


class CompactRequest(SessionFields):
    compacted: bool = True
    # The host's verdict: false when its compaction failed (``{ok: false, compacted: false, reason}``), true with
    # ``compacted: false`` when there was nothing to compact. Absent (older plugins): not told apart.
    ok: bool | None = None
    tokens_before: int | None = Field(None, alias="tokensBefore", ge=0, le=MAX_INT)
    tokens_after: int | None = Field(None, alias="tokensAfter", ge=0, le=MAX_INT)
    summary: str | None = Field(None, max_length=2_000_000)
    reason: str | None = Field(None, max_length=2000)


class CompactResponse(Wire):
    recorded: bool
    compaction_id: int = Field(alias="compactionId")
    status: Literal["compacted", "failed", "skipped", "not-compacted"]
    snapshot: str | None  # pre-compaction-N, only when the host did compact
    last_message_id: int | None = Field(alias="lastMessageId")


class SubagentSpawnRequest(Wire):
    parent_session_key: SessionKey = Field(alias="parentSessionKey")
    child_session_key: SessionKey = Field(alias="childSessionKey")
    context_mode: str | None = Field(None, alias="contextMode", max_length=64)
    ttl_ms: int | None = Field(None, alias="ttlMs", ge=0, le=MAX_INT)


class SubagentSpawnResponse(Wire):
    spawn_id: int = Field(alias="spawnId")


class SubagentRollbackRequest(Wire):
    # ``names_one`` below, as the schema states it: at least one of the two, not null.
    model_config = ConfigDict(
        json_schema_extra={
            "anyOf": [
                {"required": ["spawnId"], "properties": {"spawnId": {"type": "integer"}}},
                {"required": ["childSessionKey"], "properties": {"childSessionKey": {"type": "string"}}},
            ]
        }
    )
    spawn_id: int | None = Field(None, alias="spawnId", ge=1, le=MAX_INT)
    child_session_key: str | None = Field(None, alias="childSessionKey", min_length=1, max_length=512)

    @model_validator(mode="after")
    def names_one(self) -> SubagentRollbackRequest:
        if self.spawn_id is None and self.child_session_key is None:
            raise ValueError("send 'spawnId' or 'childSessionKey'")
        return self


class SubagentRollbackResponse(Wire):
    rolled_back: bool = Field(alias="rolledBack")


class SubagentEndedRequest(Wire):
    child_session_key: str = Field(alias="childSessionKey", min_length=1, max_length=512)
    reason: str = Field("completed", max_length=64)


class SubagentEndedResponse(Wire):
    ended: bool
    outcomes_copied: int = Field(alias="outcomesCopied")
