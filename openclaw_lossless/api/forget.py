"""Forgetting over HTTP, under the token: one message, one session, or any selection (``store/sqlite/forgetting.py``).

Every endpoint takes ``dryRun``: the answer then lists exactly what would go and nothing changes. Bad input
(an unknown citation, session or agent, a match without words, a selection of nothing, a time range alone
selecting everything without ``all``) is refused in the error shape and changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field, field_validator

from openclaw_lossless.api.deps import SidecarDep
from openclaw_lossless.api.spool import store_spooled
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.errors import BadRequest, NotFound
from openclaw_lossless.observe.metrics import Metrics
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.forgetting import Selector

router = APIRouter(prefix="/v1", tags=["forget"])
CITATION = re.compile(r"^(?:msg:)?([1-9][0-9]{0,17})$")


class Wire(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class ForgetRequest(Wire):
    ids: list[str] = Field(default_factory=list, max_length=10_000, description="Citations: 'msg:N' (or 'N').")
    session_id: str | None = Field(None, alias="sessionId", min_length=1, max_length=512)
    agent_id: str | None = Field(None, alias="agentId", min_length=1, max_length=128)
    since: float | None = Field(None, description="Only messages from this time on (epoch seconds).")
    until: float | None = Field(None, description="Only messages up to this time (epoch seconds).")
    match: str | None = Field(None, max_length=20_000, description="Messages holding every word of this query.")
    all: bool = Field(False, description="Allow a time range alone to select every stored message.")
    dry_run: bool = Field(False, alias="dryRun", description="List what would go; change nothing.")
    file: str | None = Field(
        None, min_length=1, max_length=4096, description="A workspace memory file (its path in the workspace)."
    )

    @field_validator("ids")
    @classmethod
    def _citations(cls, ids: list[str]) -> list[str]:
        bad = [i for i in ids if not CITATION.match(i)]
        if bad:
            raise ValueError(f"a citation is msg:N, not {bad[0][:40]!r}")
        return ids

    def selector(self, file_chunks: tuple[int, ...] = ()) -> Selector:
        """The selection; ``file_chunks``: the ids of the memory file's chunks ``file`` names (``chunks_of``)."""
        return Selector(
            ids=file_chunks or tuple(int(CITATION.match(i).group(1)) for i in self.ids),  # type: ignore[union-attr]
            session=self.session_id,
            agent=self.agent_id,
            since=self.since,
            until=self.until,
            match=self.match,
            everything=self.all,
        )


class Answer(Wire):
    """Read from ``store.forget``'s dataclasses: the wire names them here."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid", from_attributes=True)


class ForgottenMessage(Answer):
    id: int
    citation: str
    created_at: float = Field(alias="createdAt")
    role: str
    session_id: str = Field(alias="sessionId")
    agent_id: str = Field(alias="agentId")
    excerpt: str = Field(description="The first words of its text, for recognising it.")
    archived: bool = Field(description="Whether it was in a gzip archive rather than the hot store.")
    text: str | None = Field(None, description="Its whole text, for a selection by match.")


class ForgetResponse(Answer):
    dry_run: bool = Field(alias="dryRun")
    forgotten: int = Field(description="Messages forgotten (or that would be, on a dry run).")
    stored: int
    archived: int
    sessions: list[str] = Field(description="Sessions forgotten whole: their compaction summaries go too.")
    messages: list[ForgottenMessage]
    removed: int | None = None
    archive_files_rewritten: int | None = Field(None, alias="archiveFilesRewritten")
    wal_truncated: bool | None = Field(None, alias="walTruncated")


@dataclass(frozen=True)
class ForgetParts:
    """What forgetting touches: the store, the vector index, the archives (``settings``) and the counters; and
    what it does first: store the plugin's spooled turns, so the selection covers them (``api/spool.py``)."""

    store: Store
    index: Nearest | None
    settings: Settings
    metrics: Metrics | None = None  # None: not counted (the CLI on the file)
    first: Callable[[], object] | None = None

    @classmethod
    def of(cls, sidecar: Sidecar) -> ForgetParts:
        return cls(sidecar.store, sidecar.index, sidecar.settings, sidecar.metrics, lambda: store_spooled(sidecar))


def get_forget_parts(sidecar: SidecarDep) -> ForgetParts:
    return ForgetParts.of(sidecar)


ForgetPartsDep = Annotated[ForgetParts, Depends(get_forget_parts)]


def run_forget(parts: ForgetParts, selector: Selector, dry_run: bool) -> ForgetResponse:
    """Plan and (unless ``dry_run``) forget, counted in the metrics: the one path for the API and the web UI.

    The plugin's spooled turns are stored first (``parts.first``), as its next commit would: the selection
    then covers them, and a dry run lists what the forget itself removes."""
    if parts.first is not None:
        parts.first()
    store = parts.store
    result = store.ops.forgetting.run(store.db, parts.index, parts.settings.archive_dir, selector, dry_run=dry_run)
    if not dry_run and parts.metrics is not None:
        parts.metrics.counters["messages_forgotten"] += result.forgotten
    return ForgetResponse.model_validate(result)


DryRun = Annotated[bool, Query(alias="dryRun", description="List what would go; change nothing.")]


def chunks_of(store: Store, request: ForgetRequest) -> tuple[int, ...]:
    """The ids of the stored chunks of the memory file ``request.file`` names (of ``agentId``'s workspace, or
    of every agent's), or ``()`` when it names none; ``BadRequest``/``NotFound`` saying what to fix."""
    if request.file is None:
        return ()
    if request.ids:
        raise BadRequest("name citations or a memory file, not both: nothing was forgotten")
    conn, ops = store.db.reader(), store.ops
    path = request.file.removeprefix("file:").split("#", 1)[0]
    prefix = f"file:{path}#L"
    ids = tuple(
        chunk.id
        for agent, rowid in ops.memory_files.sessions(conn).items()
        if request.agent_id in (None, agent)
        for chunk in ops.memory_files.stored_chunks(conn, rowid)
        if chunk.citation.startswith(prefix)
    )
    if not ids:
        raise NotFound(f"no chunk of a memory file {path[:200]!r} is stored: nothing was forgotten")
    return ids


@router.post("/forget", response_model_by_alias=True)
def forget_selection(parts: ForgetPartsDep, body: ForgetRequest) -> ForgetResponse:
    """Forget every message the selectors name together (citations or a memory file's chunks AND session AND
    agent AND time AND match)."""
    return run_forget(parts, body.selector(chunks_of(parts.store, body)), body.dry_run)


@router.delete("/messages/{message_id}", response_model_by_alias=True)
def forget_message(
    parts: ForgetPartsDep,
    message_id: Annotated[int, Path(ge=1, le=2**62, description="The N of a citation msg:N.")],
    dry_run: DryRun = False,
) -> ForgetResponse:
    return run_forget(parts, Selector(ids=(message_id,)), dry_run)


@router.delete("/sessions/{session_id}", response_model_by_alias=True)
def forget_session(
    parts: ForgetPartsDep,
    session_id: Annotated[str, Path(min_length=1, max_length=512)],
    dry_run: DryRun = False,
) -> ForgetResponse:
    return run_forget(parts, Selector(session=session_id), dry_run)
