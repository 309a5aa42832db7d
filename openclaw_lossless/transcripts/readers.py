"""Reading the two kinds of transcript store, SQLite (2026.7.2 on) and JSONL files (before), read-only."""

from __future__ import annotations

import hashlib
import importlib
import io
import json
from collections import Counter
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

from openclaw_lossless.store.sqlite.connection import Connection, sqlite_module
from openclaw_lossless.transcripts.entries import entry_kind, parse_entry, session_key_for
from openclaw_lossless.transcripts.feed import BATCH, Feed, load_cursor, save_cursor
from openclaw_lossless.transcripts.sink import Sink
from openclaw_lossless.transcripts.sources import Source, SourceReport, is_identifier

_TAIL_BYTES = 64
# Whether to read a session: (agent id, session id, the key OpenClaw recorded or None, when OpenClaw created
# it in epoch ms or None). Catch-up passes one that keeps to what live capture would have seen.
Follow = Callable[[str, str, str | None, int | None], bool]


@dataclass(frozen=True)
class Codec:
    """zstd, from the stdlib (Python 3.14+) or the ``backports.zstd`` package; None when neither is there."""

    decompress: Callable[[bytes], bytes]
    error: type[Exception]

    @staticmethod
    def load() -> Codec | None:
        for name in ("compression.zstd", "backports.zstd"):
            try:
                module = importlib.import_module(name)
            except ImportError:
                continue
            return Codec(module.decompress, module.ZstdError)
        return None


class Reader:
    """What both kinds of source share: a report, the sessions touched, and a plan → run life cycle."""

    def __init__(self, sink: Sink, source: Source, codec: Codec | None, follow: Follow | None = None) -> None:
        self.sink = sink
        self.source = source
        self.codec = codec
        self.follow = follow
        self.report = SourceReport(source.source_id, source.kind, source.agent_id)
        self.session_ids: set[str] = set()

    def _wanted(self, session_id: str, recorded_key: str | None, key: str | None, born_ms: int | None) -> bool:
        """Whether to read this session: the user's session selection, then the caller's ``follow``.

        The selection matches the key OpenClaw recorded, or the session id when it recorded none (never the
        ``agent:<id>:import:<session>`` key the import makes up).
        """
        if not self.sink.selection.captures(session_id, key if recorded_key else None):
            self.report.sessions_excluded += 1
            return False
        if self.follow is not None and not self.follow(self.source.agent_id, session_id, recorded_key, born_ms):
            self.report.sessions_left += 1
            return False
        return True

    def plan(self) -> int:
        """Find what is new since the cursors; returns how many entries that is (for progress)."""
        raise NotImplementedError

    def run(self, tick: Callable[[int], None]) -> None:
        raise NotImplementedError

    def _finish(self, feed: Feed) -> None:
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


class SqliteReader(Reader):
    """An agent's ``openclaw-agent.sqlite``, opened ``mode=ro`` and ``query_only``; it is never written."""

    def __init__(
        self, sink: Sink, source: Source, codec: Codec | None, only: str | None, follow: Follow | None = None
    ) -> None:
        super().__init__(sink, source, codec, follow)
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
        births = session_births(conn, where, params)
        sessions = conn.execute(
            f"SELECT session_id, max(seq), count(*) FROM transcript_events {where} GROUP BY session_id", params
        ).fetchall()
        plans: list[_SessionPlan] = []
        for session_id, max_seq, count in sessions:
            if not isinstance(session_id, str) or not is_identifier(session_id):
                self.report.skipped_malformed += int(count)
                continue
            key = session_key_for(keys.get(session_id), self.source.agent_id, session_id)
            if not self._wanted(session_id, keys.get(session_id), key, births.get(session_id)):
                continue
            generation = generations.get(session_id)
            after = self._resume_after(session_id, generation, int(max_seq))
            if after < int(max_seq):
                pending = count if after < 0 else _count_after(conn, session_id, after)
                plans.append(_SessionPlan(session_id, key, after, generation, int(pending)))
        return plans

    def _resume_after(self, session_id: str, generation: str | None, max_seq: int) -> int:
        """The cursor's seq, unless OpenClaw rewrote or shortened the transcript since (then: from the start)."""
        cursor = load_cursor(self.sink.store, f"{self.source.source_id}#{session_id}")
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
        feed = Feed(self.sink, plan.session_id, plan.session_key, self.report)
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
                save_cursor(self.sink.store, f"{self.source.source_id}#{plan.session_id}", cursor)
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


def session_births(conn: Connection, where: str, params: tuple[Any, ...]) -> dict[str, int]:
    """session_id → when OpenClaw created it (epoch ms), where this schema version records it."""
    if {"session_id", "created_at"} <= _columns(conn, "session_windows"):
        rows = conn.execute(f"SELECT session_id, created_at FROM session_windows {where}", params)
        return {str(row[0]): int(row[1]) for row in rows if isinstance(row[1], int)}
    return {}


def session_keys(conn: Connection, where: str, params: tuple[Any, ...]) -> dict[str, str]:
    return _session_keys(conn, where, params)


def payload_columns(conn: Connection) -> str:
    return _payload_columns(conn)


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


@dataclass(frozen=True)
class _Shrink:
    """A transcript read before that now holds fewer messages: the compaction to record, keyed by what was read."""

    key: str
    before: int
    after: int


class JsonlReader(Reader):
    """One JSONL transcript (plain or ``.zst``), read from the byte offset the cursor recorded.

    The cursor also counts the messages read, so a transcript rewritten shorter (how OpenClaw compacted before
    it wrote ``compaction`` entries) is recorded as a compaction before the shorter file is read.
    """

    def __init__(
        self, sink: Sink, source: Source, codec: Codec | None, key: str | None, follow: Follow | None = None
    ) -> None:
        super().__init__(sink, source, codec, follow)
        self.session_id = source.session_id or source.path.name
        self.session_key = session_key_for(key, source.agent_id, self.session_id)
        self.recorded_key = key
        self.start: int | None = None
        self.messages_before: int | None = 0  # messages before ``start``; None: a cursor too old to say
        self.shrink: _Shrink | None = None

    def _stream(self) -> IO[bytes]:
        if not self.source.path.name.endswith(".zst"):
            return self.source.path.open("rb")
        if self.codec is None:
            raise OSError("it is zstd-compressed and no zstd codec is installed (pip install backports.zstd)")
        return io.BytesIO(self.codec.decompress(self.source.path.read_bytes()))

    def plan(self) -> int:
        if not self._wanted(self.session_id, self.recorded_key, self.session_key, None):
            return 0
        try:
            stat = self.source.path.stat()
            cursor = load_cursor(self.sink.store, self.source.source_id)
            if (cursor.get("size"), cursor.get("mtimeNs")) == (stat.st_size, stat.st_mtime_ns):
                return 0
            with self._stream() as stream:
                self.start = _resume_offset(stream, cursor)
                if self.start > 0:
                    counted = cursor.get("messages")
                    self.messages_before = counted if isinstance(counted, int) else None
                else:
                    self.shrink = _shrunk(stream, cursor)
                stream.seek(self.start)
                return sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))
        except OSError as exc:
            self.report.error = f"cannot read {self.source.source_id}: {exc}"
        except self._codec_errors() as exc:
            self.report.error = f"cannot decompress {self.source.source_id}: {exc}"
        return 0

    def entries(self, entry: dict[str, Any] | None) -> list[dict[str, Any] | None]:
        """The transcript entries a parsed line stands for: itself (a reader of another format converts it)."""
        return [entry]

    def _codec_errors(self) -> type[Exception]:
        return self.codec.error if self.codec is not None else OSError

    def run(self, tick: Callable[[int], None]) -> None:
        if self.start is None:
            return
        try:
            stat = self.source.path.stat()  # before reading: anything appended later is read next time
            with self._stream() as stream:
                offset, messages = self._read_lines(stream, self.start, tick)
                cursor: dict[str, Any] = {"offset": offset, "tail": _tail(stream, offset)}
                if self.messages_before is not None:
                    cursor["messages"] = self.messages_before + messages
            save_cursor(
                self.sink.store, self.source.source_id, cursor | {"size": stat.st_size, "mtimeNs": stat.st_mtime_ns}
            )
        except OSError as exc:
            self.report.error = f"reading {self.source.source_id} stopped: {exc}"
        except self._codec_errors() as exc:
            self.report.error = f"cannot decompress {self.source.source_id}: {exc}"

    def _read_lines(self, stream: IO[bytes], start: int, tick: Callable[[int], None]) -> tuple[int, int]:
        """Feed every complete line from ``start``; returns the offset after the last line consumed and how many
        message entries were among them.

        A last line without its newline is consumed only when it parses: OpenClaw may be writing it.
        """
        feed = Feed(self.sink, self.session_id, self.session_key, self.report)
        if self.shrink is not None:
            feed.shrank(self.shrink.key, self.shrink.before, self.shrink.after)
        stream.seek(start)
        offset = start
        lines = messages = 0
        for line in stream:
            entry = parse_entry(line) if line.strip() else None
            if not line.endswith(b"\n") and entry is None:
                break
            offset += len(line)
            if line.strip():
                for each in self.entries(entry):
                    feed.add(each, None)
                    messages += entry_kind(each) == "message"
            lines += 1
            if lines % BATCH == 0:
                tick(BATCH)
        self._finish(feed)
        tick(lines % BATCH)
        return offset, messages


def _shrunk(stream: IO[bytes], cursor: dict[str, Any]) -> _Shrink | None:
    """The compaction a transcript read before stands for when it now holds fewer messages.

    Only for a file without ``compaction`` entries: one that has them says itself where it compacted.
    """
    before, offset, tail = cursor.get("messages"), cursor.get("offset"), cursor.get("tail")
    if not isinstance(before, int) or not isinstance(offset, int) or not isinstance(tail, str):
        return None
    stream.seek(0)
    kinds = Counter(entry_kind(parse_entry(line)) for line in stream if line.strip())
    after = kinds["message"]
    if after >= before or kinds["compaction"]:
        return None
    return _Shrink(f"shrink.{offset}.{tail[:32]}", before, after)


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


def legacy_keys(sessions_dir: Path) -> dict[str, str]:
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
