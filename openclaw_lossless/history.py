"""Importing an existing OpenClaw installation's history: every transcript it keeps, read-only, once.

Owns reading OpenClaw's transcript stores and feeding them to the sidecar. Why: a user who installs the
plugin already has months of history that OpenClaw keeps; recall should reach it from the first turn, and
the bootstrap hook brings in a session it has never seen. The lossless store is written only through
``Sidecar.ingest`` and ``snapshots.record_compaction``; OpenClaw's files are never written.

Where OpenClaw 2026.9.6 keeps transcripts (read from its ``dist`` code):

- Since 2026.7.2, ``<state>/agents/<agentId>/agent/openclaw-agent.sqlite`` (``OPENCLAW_AGENT_SCHEMA_SQL`` in
  ``openclaw-agent-board-schema-*.mjs``, agent schema 23). Table ``transcript_events(session_id TEXT, seq
  INTEGER, event_json TEXT, created_at INTEGER /* ms */, event_zstd BLOB, event_utf8_bytes INTEGER,
  navigation_json TEXT, PRIMARY KEY (session_id, seq))``: one entry per row, in ``seq`` order per session.
  An entry of 1 KiB or more is usually stored zstd-compressed (``event_json`` NULL, ``event_zstd`` one frame,
  ``event_utf8_bytes`` its decoded length; ``transcript-payload-*.mjs``). The session key lives in
  ``session_windows(session_id PRIMARY KEY, session_key)`` (``session_nodes(session_key, current_session_id)``
  points at the current window; older schemas had ``sessions`` / ``session_entries`` with the same two
  columns). ``transcript_rewrite_watermarks(session_id, generation)`` changes whenever OpenClaw rewrites a
  transcript; OpenClaw watches (max seq, generation) for changes, and so do our cursors.
- Up to 2026.7.1, ``<state>/agents/<agentId>/sessions/<sessionId>.jsonl`` (``-topic-<id>`` for topics), with
  ``sessions.json`` mapping each session key to ``{sessionId, sessionFile?, ...}``. Transcripts reset or
  deleted in either era are kept beside them as ``<sessionId>.jsonl.reset.<stamp>`` / ``.deleted.<stamp>``
  (``.zst`` when compressed; ``artifacts-*.mjs``) and are imported too. Backups (``.bak.<stamp>``),
  compaction checkpoints (``.checkpoint.<uuid>.jsonl``), trajectories and the copies the SQLite migration
  leaves (``.migrated``, ``session-sqlite-import-archive/``) repeat history held elsewhere: skipped.
  Transcripts moved to the opt-in cold storage (``session_transcript_cold_archives``) are not read.

Entries: the ``session`` header (version 4); ``message`` ``{type, id, parentId, timestamp, message}`` whose
``message`` is the AgentMessage (dated by its entry when it has no timestamp); ``compaction`` ``{summary,
firstKeptEntryId, tokensBefore, tokensAfter?}``, recorded as a compaction at its place in the message order.
``model_change``, ``thinking_level_change``, ``custom``, ``reset``, ``label`` and the like carry no
conversation and are counted, not stored. Compactions are taken only from ``compaction`` entries, never
inferred from gaps in the ``parentId`` chain. A malformed line or row is counted and skipped; a source that
cannot be read is reported and the others go on.

Incremental and idempotent: a message's identity in the store is its content hash, so reading an entry twice
stores it once. Cursors in ``meta`` (``import.cursor.<source>``: the last ``seq`` and rewrite generation per
session, or a file's byte offset, size, mtime and a hash of the bytes before the offset) let a rerun skip
what it read; a rewritten or shrunk transcript is read again from the start. An imported compaction is keyed
by its entry id (``import.compaction.<session>.<entry>``) in the transaction that records it, and one the
``compact`` hook already recorded live (same session, same summary) is not recorded again.

Read-only: the database is opened ``mode=ro`` with ``query_only``. Like any reader of a WAL database, SQLite
takes its read locks in the ``-shm`` file, and creates the empty ``-wal``/``-shm`` companions (with the
database's permissions) when OpenClaw is not running; the database and transcripts are never changed.
"""

from __future__ import annotations

import hashlib
import importlib
import io
import json
import re
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from openclaw_lossless.capture.records import canonical_json
from openclaw_lossless.errors import BadRequest, InvalidSessionKey, NotFound
from openclaw_lossless.store import snapshots
from openclaw_lossless.store.connection import Connection, sqlite_module
from openclaw_lossless.store.sessions import agent_of, ensure_session, find_session

if TYPE_CHECKING:
    from openclaw_lossless.sidecar import Sidecar

SQLITE_NAME = "openclaw-agent.sqlite"
CURSOR_PREFIX = "import.cursor."
COMPACTION_PREFIX = "import.compaction."
BATCH = 500
_TAIL_BYTES = 64
_MALFORMED = "malformed"
_AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
_SAFE_SESSION_ID = re.compile(r"^[^\W_][\w.\-]{0,127}$")  # OpenClaw's validateSessionId, near enough
_ARCHIVE = re.compile(
    r"^(?P<session>.+)\.jsonl\.(?:reset|deleted)\.\d{4}-\d{2}-\d{2}T\d{2}-\d{2}-\d{2}(?:\.\d{3})?Z"
    r"(?:\.[0-9a-f]{32})?(?P<zst>\.zst)?$"
)
_CHECKPOINT = re.compile(r"\.checkpoint\.[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\.jsonl$", re.I)

Progress = Callable[[int, int], object]  # (entries done, entries planned); what it returns is ignored
SourceKind = Literal["sqlite", "jsonl"]


@dataclass(frozen=True)
class Source:
    """One transcript store: an agent's SQLite database, or one JSONL transcript file of one session."""

    kind: SourceKind
    agent_id: str
    path: Path
    source_id: str  # the path under the state dir: stable across runs, it names the cursor
    session_id: str | None = None  # JSONL only: the session the file holds


@dataclass
class SourceReport:
    source: str
    kind: str
    agent_id: str
    sessions: int = 0
    entries_read: int = 0
    messages_seen: int = 0
    messages_imported: int = 0
    compactions: int = 0
    skipped_malformed: int = 0
    skipped_compressed: int = 0  # zstd rows while no zstd codec is installed; read again once one is
    skipped_types: dict[str, int] = field(default_factory=dict)
    error: str | None = None


@dataclass
class ImportReport:
    sources: int = 0
    sessions: int = 0
    messages_seen: int = 0
    messages_imported: int = 0
    compactions: int = 0
    skipped_malformed: int = 0
    skipped_compressed: int = 0
    errors: int = 0
    details: list[SourceReport] = field(default_factory=list)


# -- discovery ---------------------------------------------------------------------------------------------


def discover(state_dir: Path) -> list[Source]:
    """Every agent's transcript stores under an OpenClaw state dir: per agent, SQLite first, then files."""
    agents = state_dir / "agents"
    if not agents.is_dir():
        return []
    found: list[Source] = []
    for agent_dir in sorted(agents.iterdir()):
        if agent_dir.is_dir() and _AGENT_ID.match(agent_dir.name):
            found += _agent_sources(state_dir, agent_dir)
    return found


def _agent_sources(state_dir: Path, agent_dir: Path) -> list[Source]:
    agent = agent_dir.name
    database = agent_dir / "agent" / SQLITE_NAME
    sources = [Source("sqlite", agent, database, _relative(state_dir, database))] if database.is_file() else []
    sessions_dir = agent_dir / "sessions"
    if sessions_dir.is_dir():
        for path in sorted(sessions_dir.iterdir()):
            session_id = transcript_session_id(path.name)
            if session_id is not None and path.is_file():
                sources.append(Source("jsonl", agent, path, _relative(state_dir, path), session_id))
    return sources


def transcript_session_id(name: str) -> str | None:
    """The session a file in ``sessions/`` holds, or None when it is not a transcript we import."""
    archived = _ARCHIVE.match(name)
    if archived:
        stem = archived["session"]
    elif name.endswith(".jsonl") and not name.endswith(".trajectory.jsonl") and not _CHECKPOINT.search(name):
        stem = name.removesuffix(".jsonl")
    else:
        return None
    return stem if _identifier(stem) else None


def _relative(state_dir: Path, path: Path) -> str:
    return path.relative_to(state_dir).as_posix()


def _identifier(value: str) -> bool:
    """The store's rule for session ids (``check_identifier``), as a test instead of an error."""
    return 0 < len(value) <= 512 and all(ord(ch) >= 32 for ch in value)


# -- entries -----------------------------------------------------------------------------------------------


def parse_entry(raw: str | bytes) -> dict[str, Any] | None:
    """One transcript entry, or None when it is not a JSON object (NaN and Infinity are not JSON)."""
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def entry_kind(entry: dict[str, Any] | None) -> str:
    """``message``, ``compaction``, another entry type (not stored), or ``malformed``."""
    kind = None if entry is None else entry.get("type")
    if entry is None or not isinstance(kind, str):
        return _MALFORMED
    if kind == "message":
        message = entry.get("message")
        return kind if isinstance(message, dict) and isinstance(message.get("role"), str) else _MALFORMED
    if kind == "compaction":
        return kind if isinstance(entry.get("summary"), str) else _MALFORMED
    return kind


def agent_message(entry: dict[str, Any], fallback_ms: int | None) -> dict[str, Any]:
    """The AgentMessage of a ``message`` entry, dated by its entry when it carries no timestamp itself."""
    message: dict[str, Any] = entry["message"]
    if "timestamp" in message:
        return message
    stamp = _epoch_ms(entry.get("timestamp"))
    stamp = fallback_ms if stamp is None else stamp
    return message if stamp is None else {**message, "timestamp": stamp}


def _epoch_ms(value: Any) -> int | None:
    if not isinstance(value, str):
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return int((parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).timestamp() * 1000)


def compaction_record(entry: dict[str, Any]) -> snapshots.CompactionRecord:
    return snapshots.CompactionRecord(
        tokens_before=_count(entry.get("tokensBefore")),
        tokens_after=_count(entry.get("tokensAfter")),
        compacted=True,
        summary=entry["summary"],
        reason="imported from the OpenClaw transcript",
    )


def _count(value: Any) -> int | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value < 2**62:
        return int(value)
    return None


def _entry_key(entry: dict[str, Any]) -> str:
    """A compaction's identity: its entry id, or the hash of the entry when it has none (version 1 files)."""
    entry_id = entry.get("id")
    if isinstance(entry_id, str) and entry_id and len(entry_id) <= 256:
        return entry_id
    return hashlib.sha256(canonical_json(entry).encode("utf-8", "surrogatepass")).hexdigest()[:32]


def session_key_for(recorded: str | None, agent_id: str, session_id: str) -> str | None:
    """The key OpenClaw recorded (legacy bare keys scoped to the agent), else ``agent:<id>:import:<session>``."""
    candidates = [_scoped(recorded, agent_id), f"agent:{agent_id}:import:{session_id}"]
    for candidate in candidates:
        if candidate is None:
            continue
        try:
            agent_of(candidate)
        except InvalidSessionKey:
            continue
        return candidate
    return None


def _scoped(key: str | None, agent_id: str) -> str | None:
    """OpenClaw's ``scopeLegacySessionKeyToAgent``: ``main`` → ``agent:<id>:main``, ``x`` → ``agent:<id>:x``."""
    raw = (key or "").strip()
    if not raw:
        return None
    if raw.lower() == "main":
        return f"agent:{agent_id}:main"
    return raw if raw.lower().startswith("agent:") else f"agent:{agent_id}:{raw}"


# -- writing into the store ----------------------------------------------------------------------------------


class _Feed:
    """One session's entries, in transcript order, into the store: messages in batches, compactions between.

    A compaction flushes the messages before it first, so its pre-compaction snapshot ends where the host's
    transcript said it did.
    """

    def __init__(self, sidecar: Sidecar, session_id: str, session_key: str | None, report: SourceReport) -> None:
        self.sidecar = sidecar
        self.session_id = session_id
        self.session_key = session_key
        self.report = report
        self.pending: list[dict[str, Any]] = []
        self.touched = False

    def add(self, entry: dict[str, Any] | None, fallback_ms: int | None) -> None:
        self.report.entries_read += 1
        kind = entry_kind(entry)
        if entry is None or kind == _MALFORMED:
            self.report.skipped_malformed += 1
        elif kind == "message":
            self.touched = True
            self.report.messages_seen += 1
            self.pending.append(agent_message(entry, fallback_ms))
            if len(self.pending) >= BATCH:
                self.flush()
        elif kind == "compaction":
            self.touched = True
            self.flush()
            self.report.compactions += self._record(entry)
        else:
            self.report.skipped_types[kind] = self.report.skipped_types.get(kind, 0) + 1

    def flush(self) -> None:
        batch, self.pending = self.pending, []
        if batch:
            self.report.messages_imported += self._ingest(batch)

    def _ingest(self, batch: list[dict[str, Any]]) -> int:
        """Store the batch; when one message cannot be captured, store the others one by one and count it."""
        try:
            return self.sidecar.ingest(
                self.session_id, self.session_key, batch, heartbeat=False, recall=self.sidecar.settings.recall
            )
        except (BadRequest, UnicodeEncodeError):  # not an AgentMessage; a lone surrogate SQLite cannot bind
            if len(batch) > 1:
                return sum(self._ingest([message]) for message in batch)
            self.report.messages_seen -= 1
            self.report.skipped_malformed += 1
            return 0

    def _record(self, entry: dict[str, Any]) -> int:
        """Record the compaction unless it is already there; the key and the record share a commit.

        Already there: imported before (its key), or recorded live by the ``compact`` hook when the plugin was
        running (same session, same summary).
        """
        meta_key = f"{COMPACTION_PREFIX}{self.session_id}.{_entry_key(entry)}"
        record = compaction_record(entry)

        def work(conn: Connection) -> int:
            if conn.execute("SELECT 1 FROM meta WHERE key = ?", (meta_key,)).fetchone():
                return 0
            session = ensure_session(conn, self.session_id, self.session_key)
            live = conn.execute(
                "SELECT id FROM compactions WHERE session_rowid = ? AND summary = ?", (session.rowid, record.summary)
            ).fetchone()
            compaction_id = live[0] if live else snapshots.record_compaction(conn, session, record)["compactionId"]
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (meta_key, str(compaction_id)))
            return 0 if live else 1

        return self.sidecar.db.write(work)


def _load_cursor(sidecar: Sidecar, name: str) -> dict[str, Any]:
    row = sidecar.db.reader().execute("SELECT value FROM meta WHERE key = ?", (CURSOR_PREFIX + name,)).fetchone()
    value = parse_entry(row[0]) if row is not None else None
    return value or {}


def _save_cursor(sidecar: Sidecar, name: str, value: dict[str, Any]) -> None:
    params = (CURSOR_PREFIX + name, json.dumps(value, sort_keys=True))
    sidecar.db.write(lambda conn: conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", params))


# -- reading -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Codec:
    """zstd, from the stdlib (Python 3.14+) or the ``backports.zstd`` package; None when neither is there."""

    decompress: Callable[[bytes], bytes]
    error: type[Exception]

    @staticmethod
    def load() -> _Codec | None:
        for name in ("compression.zstd", "backports.zstd"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            return _Codec(module.decompress, module.ZstdError)
        return None


class _Reader:
    """What both kinds of source share: a report, the sessions touched, and a plan → run life cycle."""

    def __init__(self, sidecar: Sidecar, source: Source, codec: _Codec | None) -> None:
        self.sidecar = sidecar
        self.source = source
        self.codec = codec
        self.report = SourceReport(source.source_id, source.kind, source.agent_id)
        self.session_ids: set[str] = set()

    def plan(self) -> int:
        """Find what is new since the cursors; returns how many entries that is (for progress)."""
        raise NotImplementedError

    def run(self, tick: Callable[[int], None]) -> None:
        raise NotImplementedError

    def _finish(self, feed: _Feed) -> None:
        feed.flush()
        if feed.touched:
            self.session_ids.add(feed.session_id)
            self.report.sessions = len(self.session_ids)


@dataclass
class _SessionPlan:
    session_id: str
    session_key: str | None
    after_seq: int  # read rows with seq > after_seq; -1 reads the whole transcript
    generation: str | None
    pending: int


class _SqliteReader(_Reader):
    """An agent's ``openclaw-agent.sqlite``, opened ``mode=ro`` and ``query_only``; it is never written."""

    def __init__(self, sidecar: Sidecar, source: Source, codec: _Codec | None, only: str | None) -> None:
        super().__init__(sidecar, source, codec)
        self.only = only
        self.plans: list[_SessionPlan] = []
        self.module = sqlite_module()

    def _open(self) -> Connection:
        target = f"file:{quote(self.source.path.resolve().as_posix())}?mode=ro"
        conn = self.module.connect(target, uri=True, isolation_level=None, timeout=30.0, check_same_thread=False)
        conn.execute("PRAGMA query_only = ON")
        return conn

    def plan(self) -> int:
        try:
            with closing(self._open()) as conn:
                self.plans = self._plan(conn)
        except self.module.Error as exc:
            self.report.error = f"cannot read {self.source.source_id}: {exc}"
        return sum(plan.pending for plan in self.plans)

    def _plan(self, conn: Connection) -> list[_SessionPlan]:
        if "seq" not in _columns(conn, "transcript_events"):
            return []
        where, params = ("WHERE session_id = ?", (self.only,)) if self.only else ("", ())
        keys = _session_keys(conn, where, params)
        generations = _generations(conn, where, params)
        sessions = conn.execute(
            f"SELECT session_id, max(seq), count(*) FROM transcript_events {where} GROUP BY session_id", params
        ).fetchall()
        plans: list[_SessionPlan] = []
        for session_id, max_seq, count in sessions:
            if not isinstance(session_id, str) or not _identifier(session_id):
                self.report.skipped_malformed += int(count)
                continue
            generation = generations.get(session_id)
            after = self._resume_after(session_id, generation, int(max_seq))
            if after < int(max_seq):
                pending = count if after < 0 else _count_after(conn, session_id, after)
                key = session_key_for(keys.get(session_id), self.source.agent_id, session_id)
                plans.append(_SessionPlan(session_id, key, after, generation, int(pending)))
        return plans

    def _resume_after(self, session_id: str, generation: str | None, max_seq: int) -> int:
        """The cursor's seq, unless OpenClaw rewrote or shortened the transcript since (then: from the start)."""
        cursor = _load_cursor(self.sidecar, f"{self.source.source_id}#{session_id}")
        seq = cursor.get("seq")
        if not isinstance(seq, int) or cursor.get("generation") != generation or seq > max_seq:
            return -1
        return seq

    def run(self, tick: Callable[[int], None]) -> None:
        if not self.plans:
            return
        try:
            with closing(self._open()) as conn:
                payload = _payload_columns(conn)
                for plan in self.plans:
                    self._run_session(conn, payload, plan, tick)
        except self.module.Error as exc:
            self.report.error = f"reading {self.source.source_id} stopped: {exc}"

    def _run_session(self, conn: Connection, payload: str, plan: _SessionPlan, tick: Callable[[int], None]) -> None:
        """Page through the session's new rows; the cursor advances after each page is stored.

        Short pages keep each read transaction short, so OpenClaw's checkpoints are never held up.
        """
        feed = _Feed(self.sidecar, plan.session_id, plan.session_key, self.report)
        last, stored_upto = plan.after_seq, plan.after_seq
        blocked = False
        while rows := conn.execute(
            f"SELECT seq, {payload}, created_at FROM transcript_events WHERE session_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (plan.session_id, last, BATCH),
        ).fetchall():
            for seq, text, packed, size, created_at in rows:
                raw = text if text is not None else self._unpack(packed, size)
                if raw is None:
                    self.report.skipped_compressed += 1
                    blocked = True  # the cursor stays before it, so a run with a codec imports it
                else:
                    feed.add(parse_entry(raw), created_at if isinstance(created_at, int) else None)
                last = int(seq)
                stored_upto = stored_upto if blocked else last
            feed.flush()
            if stored_upto > plan.after_seq:
                cursor = {"seq": stored_upto, "generation": plan.generation}
                _save_cursor(self.sidecar, f"{self.source.source_id}#{plan.session_id}", cursor)
            tick(len(rows))
        self._finish(feed)

    def _unpack(self, packed: Any, size: Any) -> str | bytes | None:
        """A compressed row's JSON; b"" (malformed) when it does not decode to its recorded size; None: no codec."""
        if packed is None:
            return b""
        if self.codec is None:
            return None
        try:
            data = self.codec.decompress(bytes(packed))
        except self.codec.error:
            return b""
        return data if not isinstance(size, int) or len(data) == size else b""


def _columns(conn: Connection, table: str) -> set[str]:
    return {str(row[1]) for row in conn.execute(f"PRAGMA table_info({table})")}


def _payload_columns(conn: Connection) -> str:
    """Schema 23 may compress a row; older schemas had ``event_json`` only."""
    if {"event_zstd", "event_utf8_bytes"} <= _columns(conn, "transcript_events"):
        return "event_json, event_zstd, event_utf8_bytes"
    return "event_json, NULL, NULL"


def _session_keys(conn: Connection, where: str, params: tuple[Any, ...]) -> dict[str, str]:
    """session_id → session_key from whichever table this schema version keeps it in."""
    for table in ("session_windows", "sessions", "session_entries"):
        if {"session_id", "session_key"} <= _columns(conn, table):
            rows = conn.execute(f"SELECT session_id, session_key FROM {table} {where}", params)
            return {str(row[0]): str(row[1]) for row in rows if row[1] is not None}
    return {}


def _generations(conn: Connection, where: str, params: tuple[Any, ...]) -> dict[str, str]:
    if {"session_id", "generation"} <= _columns(conn, "transcript_rewrite_watermarks"):
        rows = conn.execute(f"SELECT session_id, generation FROM transcript_rewrite_watermarks {where}", params)
        return {str(row[0]): str(row[1]) for row in rows}
    return {}


def _count_after(conn: Connection, session_id: str, after: int) -> int:
    row = conn.execute(
        "SELECT count(*) FROM transcript_events WHERE session_id = ? AND seq > ?", (session_id, after)
    ).fetchone()
    return int(row[0])


class _JsonlReader(_Reader):
    """One JSONL transcript (plain or ``.zst``), read from the byte offset the cursor recorded."""

    def __init__(self, sidecar: Sidecar, source: Source, codec: _Codec | None, key: str | None) -> None:
        super().__init__(sidecar, source, codec)
        self.session_id = source.session_id or source.path.name
        self.session_key = session_key_for(key, source.agent_id, self.session_id)
        self.start: int | None = None

    def _stream(self) -> IO[bytes]:
        if not self.source.path.name.endswith(".zst"):
            return self.source.path.open("rb")
        if self.codec is None:
            raise OSError("it is zstd-compressed and no zstd codec is installed (pip install backports.zstd)")
        return io.BytesIO(self.codec.decompress(self.source.path.read_bytes()))

    def plan(self) -> int:
        try:
            stat = self.source.path.stat()
            cursor = _load_cursor(self.sidecar, self.source.source_id)
            if (cursor.get("size"), cursor.get("mtimeNs")) == (stat.st_size, stat.st_mtime_ns):
                return 0
            with self._stream() as stream:
                self.start = _resume_offset(stream, cursor)
                stream.seek(self.start)
                return sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))
        except OSError as exc:
            self.report.error = f"cannot read {self.source.source_id}: {exc}"
        except self._codec_errors() as exc:
            self.report.error = f"cannot decompress {self.source.source_id}: {exc}"
        return 0

    def _codec_errors(self) -> type[Exception]:
        return self.codec.error if self.codec is not None else OSError

    def run(self, tick: Callable[[int], None]) -> None:
        if self.start is None:
            return
        try:
            stat = self.source.path.stat()  # before reading: anything appended later is read next time
            with self._stream() as stream:
                offset = self._read_lines(stream, self.start, tick)
                cursor = {"offset": offset, "tail": _tail(stream, offset)}
            _save_cursor(
                self.sidecar, self.source.source_id, cursor | {"size": stat.st_size, "mtimeNs": stat.st_mtime_ns}
            )
        except OSError as exc:
            self.report.error = f"reading {self.source.source_id} stopped: {exc}"
        except self._codec_errors() as exc:
            self.report.error = f"cannot decompress {self.source.source_id}: {exc}"

    def _read_lines(self, stream: IO[bytes], start: int, tick: Callable[[int], None]) -> int:
        """Feed every complete line from ``start``; returns the offset after the last line consumed.

        A last line without its newline is consumed only when it parses: OpenClaw may be writing it.
        """
        feed = _Feed(self.sidecar, self.session_id, self.session_key, self.report)
        stream.seek(start)
        offset = start
        lines = 0
        for line in stream:
            entry = parse_entry(line) if line.strip() else None
            if not line.endswith(b"\n") and entry is None:
                break
            offset += len(line)
            if line.strip():
                feed.add(entry, None)
            lines += 1
            if lines % BATCH == 0:
                tick(BATCH)
        self._finish(feed)
        tick(lines % BATCH)
        return offset


def _resume_offset(stream: IO[bytes], cursor: dict[str, Any]) -> int:
    """The cursor's offset when the bytes before it are still the ones read; else 0 (rewritten or shrunk)."""
    offset = cursor.get("offset")
    if not isinstance(offset, int) or offset <= 0:
        return 0
    return offset if _tail(stream, offset) == cursor.get("tail") else 0


def _tail(stream: IO[bytes], offset: int) -> str:
    begin = max(0, offset - _TAIL_BYTES)
    stream.seek(begin)
    data = stream.read(offset - begin)
    return hashlib.sha256(data).hexdigest() if len(data) == offset - begin else ""


def _legacy_keys(sessions_dir: Path) -> dict[str, str]:
    """Transcript file name → session key, from ``sessions.json`` (``{key: {sessionId, sessionFile?}}``)."""
    try:
        store = json.loads((sessions_dir / "sessions.json").read_bytes())
    except (OSError, ValueError, RecursionError):
        return {}
    keys: dict[str, str] = {}
    for key, entry in store.items() if isinstance(store, dict) else ():
        if not isinstance(entry, dict):
            continue
        session_file, session_id = entry.get("sessionFile"), entry.get("sessionId")
        if isinstance(session_file, str) and session_file.strip():
            keys[Path(session_file.strip()).name] = key
        elif isinstance(session_id, str) and session_id.strip():
            keys[f"{session_id.strip()}.jsonl"] = key
    return keys


# -- entry points ----------------------------------------------------------------------------------------------


def import_history(
    sidecar: Sidecar,
    state_dir: Path,
    *,
    agent: str | None = None,
    session_id: str | None = None,
    progress: Progress | None = None,
) -> ImportReport:
    """Import every transcript under an OpenClaw state dir (or one agent's, or one session's); rerunnable."""
    if not state_dir.is_dir():
        raise NotFound(f"no OpenClaw state dir at {state_dir}: pass --openclaw-state or set OPENCLAW_STATE_DIR")
    codec = _Codec.load()
    keys: dict[Path, dict[str, str]] = {}
    readers: list[_Reader] = []
    for source in discover(state_dir):
        if agent is not None and source.agent_id != agent:
            continue
        if source.kind == "sqlite":
            readers.append(_SqliteReader(sidecar, source, codec, session_id))
        elif session_id is None or source.session_id == session_id:
            names = keys.setdefault(source.path.parent, _legacy_keys(source.path.parent))
            readers.append(_JsonlReader(sidecar, source, codec, names.get(_primary_name(source))))
    return _run(readers, progress)


def import_session(sidecar: Sidecar, state_dir: Path, session_id: str, agent_id: str) -> int:
    """Import one session the store has never seen (the bootstrap hook's call); a known one costs one read.

    Returns the number of messages stored.
    """
    if find_session(sidecar.db.reader(), session_id) is not None:
        return 0
    if not _AGENT_ID.match(agent_id) or not _identifier(session_id):
        return 0
    agent_dir = state_dir / "agents" / agent_id
    codec = _Codec.load()
    readers: list[_Reader] = []
    database = agent_dir / "agent" / SQLITE_NAME
    if database.is_file():
        source = Source("sqlite", agent_id, database, _relative(state_dir, database))
        readers.append(_SqliteReader(sidecar, source, codec, session_id))
    transcript = agent_dir / "sessions" / f"{session_id}.jsonl"
    if _SAFE_SESSION_ID.match(session_id) and transcript.is_file():
        source = Source("jsonl", agent_id, transcript, _relative(state_dir, transcript), session_id)
        key = _legacy_keys(transcript.parent).get(transcript.name)
        readers.append(_JsonlReader(sidecar, source, codec, key))
    return _run(readers, None).messages_imported


def _primary_name(source: Source) -> str:
    """The name ``sessions.json`` knows a transcript by (an archive is known by its live name, if at all)."""
    return source.path.name if source.path.name.endswith(".jsonl") else f"{source.session_id}.jsonl"


def _run(readers: list[_Reader], progress: Progress | None) -> ImportReport:
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


def _summarise(readers: list[_Reader]) -> ImportReport:
    details = [reader.report for reader in readers]
    sessions = set().union(*(reader.session_ids for reader in readers)) if readers else set()
    return ImportReport(
        sources=len(details),
        sessions=len(sessions),
        messages_seen=sum(d.messages_seen for d in details),
        messages_imported=sum(d.messages_imported for d in details),
        compactions=sum(d.compactions for d in details),
        skipped_malformed=sum(d.skipped_malformed for d in details),
        skipped_compressed=sum(d.skipped_compressed for d in details),
        errors=sum(d.error is not None for d in details),
        details=details,
    )
