"""What the host recorded that the store does not hold: the gap report ``doctor`` shows.

Read-only on both sides: OpenClaw's transcripts are opened ``mode=ro`` and the store only read (no cursor is
loaded or saved, nothing is imported), so it can run beside a live sidecar or on a copy of the state.

A transcript message is held when its session holds a message with the same window key (``window_key``:
role, timestamp and text, computed from the message as the host has it, so neither the redaction settings
nor the path it came by matter: a committed turn, an ingest or an import), or when it belongs to a heartbeat
turn committed without its messages (``skipped.py``). Rows that are not conversation (``/lossless`` commands,
the host's own transcript-only rows: ``transcript_only.py``) are neither held nor missing. Keys are counted, so
two equal messages need two stored copies. An undated message is also looked for under the key the import gives it
(dated by its entry). Messages older than the session's oldest stored one are counted as archived when the
store has archived messages (``maxDbSizeMb``), not as missing.

``missing`` counts what catch-up is responsible for (``coverage.py``: sessions the store holds, and sessions
begun after it first heard of their agent); ``notImported`` the rest, older history that ``openclaw-lossless
import`` would bring. Sessions the user excluded are left out of both.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from openclaw_lossless.capture.records import message_time
from openclaw_lossless.capture.text import window_key
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store.backend import SQLITE, Backend
from openclaw_lossless.store.sqlite.connection import Connection, sqlite_module
from openclaw_lossless.transcripts import skipped
from openclaw_lossless.transcripts.coverage import StoreCoverage
from openclaw_lossless.transcripts.entries import agent_message, entry_kind, parse_entry, session_key_for
from openclaw_lossless.transcripts.feed import BATCH
from openclaw_lossless.transcripts.readers import (
    Codec,
    legacy_keys,
    payload_columns,
    session_births,
    session_keys,
)
from openclaw_lossless.transcripts.sources import Source, discover, is_identifier
from openclaw_lossless.transcripts.transcript_only import transcript_only


@dataclass
class SessionGap:
    agent_id: str
    session_id: str
    session_key: str | None
    missing: int = 0
    first_at: float | None = None
    last_at: float | None = None
    followed: bool = True  # False: a session catch-up leaves to ``import`` (its messages are ``notImported``)

    def as_dict(self) -> dict[str, Any]:
        return {
            "agentId": self.agent_id,
            "sessionId": self.session_id,
            "sessionKey": self.session_key,
            "missing": self.missing,
            "firstAt": self.first_at,
            "lastAt": self.last_at,
            "followed": self.followed,
        }


@dataclass
class GapReport:
    missing: int = 0
    first_at: float | None = None
    last_at: float | None = None
    not_imported: int = 0
    archived: int = 0
    scanned: int = 0  # transcript messages read
    sessions_excluded: int = 0
    unreadable: int = 0  # compressed rows while no zstd codec is installed
    agents: dict[str, int] = field(default_factory=dict)  # agent id → missing
    sessions: list[SessionGap] = field(default_factory=list)  # every session with a missing or unimported message
    errors: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "missing": self.missing,
            "firstAt": self.first_at,
            "lastAt": self.last_at,
            "notImported": self.not_imported,
            "archived": self.archived,
            "scanned": self.scanned,
            "sessionsExcluded": self.sessions_excluded,
            "unreadable": self.unreadable,
            "agents": dict(self.agents),
            "sessions": [gap.as_dict() for gap in self.sessions],
            "errors": list(self.errors),
        }

    def _add(self, gap: SessionGap) -> None:
        if not gap.missing:
            return
        self.sessions.append(gap)
        if not gap.followed:
            self.not_imported += gap.missing
            return
        self.missing += gap.missing
        self.agents[gap.agent_id] = self.agents.get(gap.agent_id, 0) + gap.missing
        for stamp in (gap.first_at, gap.last_at):
            if stamp is not None:
                self.first_at = stamp if self.first_at is None else min(self.first_at, stamp)
                self.last_at = stamp if self.last_at is None else max(self.last_at, stamp)


def find_gaps(
    conn: Any,
    openclaw_state: Path,
    *,
    selection: SessionSelection | None = None,
    agent: str | None = None,
    session_id: str | None = None,
    ops: Backend = SQLITE,
) -> GapReport:
    """Messages OpenClaw's transcripts under ``openclaw_state`` hold that the store (``conn``, of backend
    ``ops``: doctor opens the SQLite file itself) does not.

    ``selection``: the sidecar's session selection (``SessionSelection.of(settings.include_sessions,
    settings.exclude_sessions)``); excluded sessions are not gaps. Writes nothing anywhere.
    """
    report = GapReport()
    if not openclaw_state.is_dir():
        report.errors.append("no OpenClaw state dir: set OPENCLAW_STATE_DIR (or LOSSLESS_OPENCLAW_STATE)")
        return report
    check = _Checker(ops, conn, selection or SessionSelection(), report)
    codec = Codec.load()
    for source in discover(openclaw_state):
        if agent is not None and source.agent_id != agent:
            continue
        if source.kind == "sqlite":
            check.sqlite(source, codec, session_id)
        elif session_id is None or source.session_id == session_id:
            check.jsonl(source, codec)
    report.sessions.sort(key=lambda gap: (not gap.followed, -(gap.last_at or 0.0), gap.session_id))
    return report


class _Checker:
    def __init__(self, ops: Backend, conn: Any, selection: SessionSelection, report: GapReport) -> None:
        self.ops = ops
        self.conn = conn
        self.selection = selection
        self.report = report
        self.coverage = StoreCoverage.load(ops, conn)
        self.archives = ops.counts.any_archived(conn)
        self.module = sqlite_module()
        self.legacy: dict[Path, dict[str, str]] = {}

    def sqlite(self, source: Source, codec: Codec | None, only: str | None) -> None:
        target = f"file:{quote(source.path.resolve().as_posix())}?mode=ro"
        try:
            with closing(self.module.connect(target, uri=True, isolation_level=None, timeout=30.0)) as host:
                host.execute("PRAGMA query_only = ON")
                self._sqlite_sessions(host, source, codec, only)
        except self.module.Error as exc:
            self.report.errors.append(f"cannot read {source.source_id}: {exc}")

    def _sqlite_sessions(self, host: Connection, source: Source, codec: Codec | None, only: str | None) -> None:
        where, params = ("WHERE session_id = ?", (only,)) if only else ("", ())
        keys, births = session_keys(host, where, params), session_births(host, where, params)
        payload = payload_columns(host)
        ids = [
            str(row[0]) for row in host.execute(f"SELECT DISTINCT session_id FROM transcript_events {where}", params)
        ]
        for session_id in ids:
            if not is_identifier(session_id):
                continue
            recorded = keys.get(session_id)
            rows = _rows(host, payload, session_id)
            entries = (
                (parse_entry(raw) if raw is not None else None, ms, raw is None) for raw, ms in _decoded(rows, codec)
            )
            self._session(source.agent_id, session_id, recorded, births.get(session_id), entries)

    def jsonl(self, source: Source, codec: Codec | None) -> None:
        session_id = source.session_id or source.path.name
        if source.path.parent not in self.legacy:  # sessions.json, read once per sessions dir
            self.legacy[source.path.parent] = legacy_keys(source.path.parent)
        recorded = self.legacy[source.path.parent].get(f"{session_id}.jsonl")  # as the import names it
        try:
            data = source.path.read_bytes()
            if source.path.name.endswith(".zst"):
                if codec is None:
                    self.report.errors.append(f"cannot read {source.source_id}: no zstd codec is installed")
                    return
                data = codec.decompress(data)
        except OSError as exc:
            self.report.errors.append(f"cannot read {source.source_id}: {exc}")
            return
        except Exception as exc:  # the codec's own error type: a damaged archive, reported, the others go on
            self.report.errors.append(f"cannot decompress {source.source_id}: {exc}")
            return
        lines = (line for line in data.splitlines() if line.strip())
        self._session(source.agent_id, session_id, recorded, None, ((parse_entry(line), None, False) for line in lines))

    def _session(
        self,
        agent_id: str,
        session_id: str,
        recorded: str | None,
        born_ms: int | None,
        entries: Iterator[tuple[dict[str, Any] | None, int | None, bool]],
    ) -> None:
        key = session_key_for(recorded, agent_id, session_id)
        if not self.selection.captures(session_id, key if recorded else None):
            self.report.sessions_excluded += 1
            return
        followed = self.coverage.follows(agent_id, session_id, recorded, born_ms)
        stored, oldest = self._stored(session_id)
        left_out = skipped.keys_of(self.ops, self.conn, session_id)  # heartbeat turns committed without their messages
        gap = SessionGap(agent_id, session_id, key, followed=followed)
        for entry, created_ms, unreadable in entries:
            if unreadable:
                self.report.unreadable += 1
                continue
            if entry is None or entry_kind(entry) != "message" or transcript_only(entry["message"]):
                continue
            self.report.scanned += 1
            raw = entry["message"]
            dated = agent_message(entry, created_ms)
            key = window_key(raw)
            if key in left_out or _take(stored, key) or (dated is not raw and _take(stored, window_key(dated))):
                continue
            at = message_time(dated.get("timestamp"), None) if "timestamp" in dated else None
            if self.archives and oldest is not None and at is not None and at <= oldest:
                self.report.archived += 1
                continue
            gap.missing += 1
            if at is not None:
                gap.first_at = at if gap.first_at is None else min(gap.first_at, at)
                gap.last_at = at if gap.last_at is None else max(gap.last_at, at)
        self.report._add(gap)

    def _stored(self, session_id: str) -> tuple[Counter[str], float | None]:
        """The window keys the store holds for the session, counted, and its oldest message's time."""
        session = self.ops.sessions.find_session(self.conn, session_id)
        if session is None:
            return Counter(), None
        keys: Counter[str] = Counter()
        oldest: float | None = None
        for key, created_at in self.ops.transcript_ledger.keys_and_times(self.conn, session.rowid):
            keys[key] += 1
            oldest = created_at if oldest is None else min(oldest, created_at)
        return keys, oldest


def _take(stored: Counter[str], key: str) -> bool:
    if stored[key] > 0:
        stored[key] -= 1
        return True
    return False


def _rows(host: Connection, payload: str, session_id: str) -> Iterator[tuple[Any, ...]]:
    """A session's rows in ``seq`` order, a page per read (short read transactions, as the import does)."""
    last = -1
    while page := host.execute(
        f"SELECT seq, {payload}, created_at FROM transcript_events WHERE session_id = ? AND seq > ?"
        " ORDER BY seq LIMIT ?",
        (session_id, last, BATCH),
    ).fetchall():
        yield from page
        last = int(page[-1][0])


def _decoded(rows: Iterator[tuple[Any, ...]], codec: Codec | None) -> Iterator[tuple[str | bytes | None, int | None]]:
    """Each row's JSON (None when it is compressed and no codec is installed) and its creation time in ms."""
    for _seq, text, packed, _size, created_at in rows:
        stamp = created_at if isinstance(created_at, int) else None
        if text is not None:
            yield text, stamp
        elif packed is None or codec is None:
            yield (b"" if packed is None else None), stamp
        else:
            try:
                yield codec.decompress(bytes(packed)), stamp
            except codec.error:
                yield b"", stamp
