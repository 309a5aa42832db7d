"""The entry points: read a whole installation's transcripts (the ``import`` command), or one unseen session's
(bootstrap)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from openclaw_lossless.errors import NotFound
from openclaw_lossless.transcripts.readers import Codec, Follow, JsonlReader, Reader, SqliteReader, legacy_keys
from openclaw_lossless.transcripts.sink import Sink
from openclaw_lossless.transcripts.sources import (
    AGENT_ID,
    SAFE_SESSION_ID,
    SQLITE_NAME,
    ReadReport,
    Source,
    discover,
    is_identifier,
    relative_path,
)

Progress = Callable[[int, int], object]  # (entries done, entries planned); what it returns is ignored


def read_transcripts(
    sink: Sink,
    state_dir: Path,
    *,
    agent: str | None = None,
    session_id: str | None = None,
    progress: Progress | None = None,
    follow: Follow | None = None,
) -> ReadReport:
    """Import every transcript under an OpenClaw state dir (or one agent's, or one session's); rerunnable.

    Sessions the user's selection excludes are never read; ``follow`` (catch-up's) narrows the rest.
    """
    if not state_dir.is_dir():
        raise NotFound(f"no OpenClaw state dir at {state_dir}: pass --openclaw-state or set OPENCLAW_STATE_DIR")
    codec = Codec.load()
    keys: dict[Path, dict[str, str]] = {}
    readers: list[Reader] = []
    for source in discover(state_dir):
        if agent is not None and source.agent_id != agent:
            continue
        if source.kind == "sqlite":
            readers.append(SqliteReader(sink, source, codec, session_id, follow))
        elif session_id is None or source.session_id == session_id:
            names = keys.setdefault(source.path.parent, legacy_keys(source.path.parent))
            readers.append(JsonlReader(sink, source, codec, names.get(_primary_name(source)), follow))
    return run_readers(readers, progress)


def read_session(sink: Sink, state_dir: Path, session_id: str, agent_id: str) -> int:
    """Import one session the store has never seen (the bootstrap hook's call); a known one costs one read.

    Returns the number of messages stored.
    """
    if sink.store.ops.sessions.find_session(sink.store.db.reader(), session_id) is not None:
        return 0
    if not AGENT_ID.match(agent_id) or not is_identifier(session_id):
        return 0
    agent_dir = state_dir / "agents" / agent_id
    codec = Codec.load()
    readers: list[Reader] = []
    database = agent_dir / "agent" / SQLITE_NAME
    if database.is_file():
        source = Source("sqlite", agent_id, database, relative_path(state_dir, database))
        readers.append(SqliteReader(sink, source, codec, session_id))
    transcript = agent_dir / "sessions" / f"{session_id}.jsonl"
    if SAFE_SESSION_ID.match(session_id) and transcript.is_file():
        source = Source("jsonl", agent_id, transcript, relative_path(state_dir, transcript), session_id)
        key = legacy_keys(transcript.parent).get(transcript.name)
        readers.append(JsonlReader(sink, source, codec, key))
    return run_readers(readers, None).messages_imported


def _primary_name(source: Source) -> str:
    """The name ``sessions.json`` knows a transcript by (an archive is known by its live name, if at all)."""
    return source.path.name if source.path.name.endswith(".jsonl") else f"{source.session_id}.jsonl"


def run_readers(readers: list[Reader], progress: Progress | None) -> ReadReport:
    """Plan every reader (for the progress total), then run each; what they came to."""
    total = sum(reader.plan() for reader in readers)
    done = 0

    def tick(count: int) -> None:
        nonlocal done
        done += count
        if progress is not None:
            progress(done, max(total, done))

    for reader in readers:
        reader.run(tick)
    return _summarise(readers)


def _summarise(readers: list[Reader]) -> ReadReport:
    details = [reader.report for reader in readers]
    sessions = set().union(*(reader.session_ids for reader in readers)) if readers else set()
    return ReadReport(
        sources=len(details),
        sessions=len(sessions),
        messages_seen=sum(d.messages_seen for d in details),
        messages_imported=sum(d.messages_imported for d in details),
        compactions=sum(d.compactions for d in details),
        skipped_malformed=sum(d.skipped_malformed for d in details),
        skipped_compressed=sum(d.skipped_compressed for d in details),
        sessions_excluded=sum(d.sessions_excluded for d in details),
        errors=sum(d.error is not None for d in details),
        details=details,
    )
