"""Forgetting: remove messages on request, for good, and keep them from coming back.

A selection (citations, a session, an agent, a time range, a keyword query; every selector given must hold)
is first planned: exactly the messages that would go, in the hot store and in the gzip archives. Bad input
changes nothing: an unknown citation, session or agent, a query without words, a selection of nothing, and a
time range alone that selects every message without ``all``.

Forgetting then, in one write transaction (the single writer serialises it with every commit, so an agent
mid-turn sees its turn whole, before or after): a tombstone per message (its session and identity, never its
text, table ``forgotten``), the deletion of the message, its vector, its place on the backlog and any
subagent outcome record citing it (and, when a whole session goes, its compaction summaries and snapshots),
with ``secure_delete`` on so freed content is zeroed, and an FTS5 ``optimize`` so the index segments that
held its words are rewritten. After the commit, a TRUNCATE checkpoint empties the WAL and the free pages are
given back; the archives are rewritten without its lines. ``insert_row`` refuses a tombstoned identity, so a
replayed turn, an import of the host's transcripts or of an older export does not bring it back.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from openclaw_lossless.errors import BadRequest, NotFound
from openclaw_lossless.store.sqlite import meta, vectors
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.messages import keep_ids_given
from openclaw_lossless.store.sqlite.migrations import FREE_SPACE_ZEROED
from openclaw_lossless.store.sqlite.rewrite import cache_key
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements import forgetting as shared
from openclaw_lossless.store.statements.forgetting import forgotten_count as forgotten_count
from openclaw_lossless.store.statements.forgetting import resurrected as resurrected

EXCERPT_CHARS = 80
_WORD = re.compile(r"\w+", re.UNICODE)


class ForgettingIndex(Protocol):
    """The in-memory vector index (``embed/index.py``): what it must do for a forgotten message."""

    def forget_ids(self, ids: Sequence[int]) -> None: ...


@dataclass(frozen=True)
class Selector:
    """What to forget; every selector given must hold (citations AND session AND agent AND time AND match)."""

    ids: tuple[int, ...] = ()
    session: str | None = None
    agent: str | None = None
    since: float | None = None
    until: float | None = None
    match: str | None = None
    everything: bool = False

    def empty(self) -> bool:
        named = (self.session, self.agent, self.since, self.until, self.match)
        return not self.ids and all(v is None for v in named)

    def time_only(self) -> bool:
        others = (self.session, self.agent, self.match)
        return not self.ids and all(v is None for v in others) and (self.since, self.until) != (None, None)


@dataclass(frozen=True)
class Named:
    """A message a selection names: a stored one, or a line of an archive file (``archive``, its ``record``)."""

    id: int
    created_at: float
    role: str
    session_id: str
    agent_id: str
    text: str
    archive: str | None = None
    record: dict[str, Any] | None = None  # the archive line as written (the export format)


@dataclass(frozen=True)
class ForgottenMessage:
    """One message as the answer lists it: enough to recognise it, its whole text for a selection by match."""

    id: int
    citation: str
    created_at: float
    role: str
    session_id: str
    agent_id: str
    excerpt: str
    archived: bool
    text: str | None


@dataclass(frozen=True)
class Forgotten:
    """What a forget did (or, on a dry run, would do); the counts of the removal only when it ran."""

    dry_run: bool
    forgotten: int
    stored: int
    archived: int
    sessions: list[str]
    messages: list[ForgottenMessage]
    removed: int | None = None
    archive_files_rewritten: int | None = None
    wal_truncated: bool | None = None


@dataclass
class Plan:
    """The messages a selection names: stored ones by id, archived ones by file."""

    stored: list[Named] = field(default_factory=list)
    archived: list[Named] = field(default_factory=list)
    sessions: list[str] = field(default_factory=list)  # sessions forgotten whole (their summaries go too)

    def view(self, *, dry_run: bool, full_text: bool) -> Forgotten:
        items = [_item(row, full_text) for row in self.stored] + [_item(row, full_text) for row in self.archived]
        return Forgotten(dry_run, len(items), len(self.stored), len(self.archived), self.sessions, items)


def _item(row: Named, full_text: bool) -> ForgottenMessage:
    excerpt = " ".join(row.text.split())
    return ForgottenMessage(
        id=row.id,
        citation=f"msg:{row.id}",
        created_at=row.created_at,
        role=row.role,
        session_id=row.session_id,
        agent_id=row.agent_id,
        excerpt=excerpt if len(excerpt) <= EXCERPT_CHARS else excerpt[: EXCERPT_CHARS - 1] + "…",
        archived=row.archive is not None,
        text=row.text if full_text else None,
    )


# -- planning -----------------------------------------------------------------------------------------------


def plan(conn: Connection, archive_dir: Path, selector: Selector) -> Plan:
    """What ``selector`` names, or a ``BadRequest``/``NotFound`` saying what to fix (nothing is changed)."""
    _check(conn, selector)
    found = Plan(stored=_stored(conn, selector))
    found.archived = list(_archived(archive_dir, selector, {row.id for row in found.stored}))
    return settle(found, selector, lambda: _count(conn))


def settle(found: Plan, selector: Selector, count_stored: Callable[[], int]) -> Plan:
    """The plan's rules once its messages are found: refuse a citation not found, a selection of nothing and a
    time range alone that takes every stored message (``count_stored``, asked only then) without ``everything``;
    name the session when it goes whole. Both backends plan through it, so they refuse and accept alike."""
    missing = sorted(set(selector.ids) - {row.id for row in found.stored + found.archived})
    if missing:
        raise NotFound(
            "no message " + ", ".join(f"msg:{i}" for i in missing[:10]) + " is stored"
            + (" within this selection" if not selector.empty() and len(selector.ids) < 2 else "")
            + ": nothing was forgotten"
        )  # fmt: skip
    if not found.stored and not found.archived:
        raise BadRequest("the selection names no stored message: nothing was forgotten")
    if selector.time_only() and not selector.everything and len(found.stored) == count_stored():
        raise BadRequest('this time range selects every stored message: add --all ("all": true) to forget everything')
    if selector.session is not None and selector.match is None and not selector.ids:
        found.sessions = [selector.session]
    return found


def _check(conn: Connection, selector: Selector) -> None:
    if selector.empty() and not selector.everything:
        raise BadRequest("name what to forget: citations (msg:N), a session, an agent, a time range or a match")
    if selector.match is not None and not _WORD.search(selector.match):
        raise BadRequest("the match has no words to search for: nothing was forgotten")
    if selector.since is not None and selector.until is not None and selector.since > selector.until:
        raise BadRequest("the time range ends before it starts: nothing was forgotten")
    if any(i <= 0 for i in selector.ids):
        raise BadRequest("a citation is msg:N with N a whole number of 1 or more")
    if selector.session is not None and not _exists(conn, "session_id", selector.session):
        raise NotFound(f"no session {selector.session[:80]!r} is stored: nothing was forgotten")
    if selector.agent is not None and not _exists(conn, "agent_id", selector.agent):
        raise NotFound(f"no session of agent {selector.agent[:80]!r} is stored: nothing was forgotten")


def _exists(conn: Connection, column: str, value: str) -> bool:
    return conn.execute(f"SELECT 1 FROM sessions WHERE {column} = ? LIMIT 1", (value,)).fetchone() is not None


def _count(conn: Connection) -> int:
    return int(conn.execute("SELECT count(*) FROM messages").fetchone()[0])


def fts_query(match: str) -> str:
    """Every word of the query, each quoted (no FTS5 syntax gets through), all required."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in _WORD.findall(match))


def _stored(conn: Connection, selector: Selector) -> list[Named]:
    clauses, params = _where(selector)
    if selector.match is not None:
        clauses.append("m.id IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)")
        params.append("{text} : (" + fts_query(selector.match) + ")")
    rows = conn.execute(
        "SELECT m.id, m.created_at, m.role, s.session_id, m.agent_id, m.text FROM messages m"
        f" JOIN sessions s ON s.id = m.session_rowid WHERE {' AND '.join(clauses)} ORDER BY m.id",
        params,
    ).fetchall()
    selected = [_row(r) for r in rows]
    ids = [row.id for row in selected]
    return selected + _outcomes(conn, ids)


def _where(selector: Selector) -> tuple[list[str], list[Any]]:
    clauses: list[str] = ["1"]
    params: list[Any] = []
    if selector.ids:
        clauses.append("m.id IN (SELECT value FROM json_each(?))")
        params.append(json.dumps(sorted(set(selector.ids))))
    return narrowed(selector, "?", clauses, params)


def narrowed(selector: Selector, mark: str, clauses: list[str], params: list[Any]) -> tuple[list[str], list[Any]]:
    """Add the session, agent and time selectors to ``clauses`` (``mark``: the driver's placeholder), in the
    order both backends' plans read them, so a selection means the same rows on either store."""
    for clause, value in (
        ("s.session_id = ", selector.session),
        ("m.agent_id = ", selector.agent),
        ("m.created_at >= ", selector.since),
        ("m.created_at <= ", selector.until),
    ):
        if value is not None:
            clauses.append(clause + mark)
            params.append(value)
    return clauses, params


def _outcomes(conn: Connection, ids: list[int]) -> list[Named]:
    """Subagent outcome records citing a selected message: copies of its text in the parent's session."""
    if not ids:
        return []
    rows = conn.execute(
        "SELECT m.id, m.created_at, m.role, s.session_id, m.agent_id, m.text FROM messages m"
        " JOIN sessions s ON s.id = m.session_rowid WHERE m.kind = 'outcome'"
        " AND m.cites IN (SELECT value FROM json_each(?)) AND m.id NOT IN (SELECT value FROM json_each(?))"
        " ORDER BY m.id",
        (json.dumps(ids), json.dumps(ids)),
    ).fetchall()
    return [_row(r) for r in rows]


def _row(row: Sequence[Any], archive: str | None = None, record: dict[str, Any] | None = None) -> Named:
    return Named(int(row[0]), float(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), archive, record)


def archive_files(archive_dir: Path) -> list[Path]:
    return sorted(archive_dir.glob("*.jsonl.gz")) if archive_dir.is_dir() else []


def _archived(archive_dir: Path, selector: Selector, stored: set[int]) -> Iterator[Named]:
    """Archived message lines the selection names (a keyword match looks at the hot store only)."""
    if selector.match is not None:
        return
    wanted = set(selector.ids)
    for path in archive_files(archive_dir):
        for record in _lines(path):
            if record is None or "type" in record or int(record.get("id") or 0) in stored:
                continue
            if _archived_match(record, selector, wanted):
                yield _row(
                    (
                        record["id"],
                        record.get("createdAt") or 0.0,
                        record.get("role", ""),
                        record.get("sessionId", ""),
                        record.get("agentId", ""),
                        record.get("text", ""),
                    ),
                    str(path),
                    record,
                )


def _archived_match(record: dict[str, Any], selector: Selector, wanted: set[int]) -> bool:
    created = float(record.get("createdAt") or 0.0)
    return (
        (not wanted or record.get("id") in wanted)
        and (selector.session is None or record.get("sessionId") == selector.session)
        and (selector.agent is None or record.get("agentId") == selector.agent)
        and (selector.since is None or created >= selector.since)
        and (selector.until is None or created <= selector.until)
    )


def _lines(path: Path) -> Iterator[dict[str, Any] | None]:
    with gzip.open(path, "rb") as handle:
        for raw in handle:
            try:
                value = json.loads(raw)
            except ValueError:
                yield None
                continue
            yield value if isinstance(value, dict) else None


# -- forgetting ---------------------------------------------------------------------------------------------


def forget(db: Database, index: ForgettingIndex | None, archive_dir: Path, found: Plan) -> tuple[int, int, bool]:
    """Remove what ``found`` names from the store, the vector index and the archives; returns the messages
    removed, the archive files rewritten and whether the write-ahead log was truncated."""
    ids = [row.id for row in found.stored]
    removed = db.write(lambda conn: _remove(conn, ids, found.sessions, found.archived))
    if index is not None:
        index.forget_ids(ids)
    zero_old_free_space(db)
    truncated = scrub_files(db)
    rewritten = rewrite_archives(db.reader(), archive_dir)
    return removed, rewritten, truncated


def _remove(conn: Connection, ids: list[int], sessions: list[str], archived: list[Named]) -> int:
    conn.execute("PRAGMA secure_delete = ON")  # freed cells and pages are zeroed, not left for a hex editor
    now = time.time()
    marks = json.dumps(ids)
    conn.execute(
        "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " SELECT s.session_id, m.content_hash, CASE WHEN json_type(m.original, '$.timestamp') IN ('integer', 'real')"
        " THEN m.window_key END, m.id, ? FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        " WHERE m.id IN (SELECT value FROM json_each(?))",
        (now, marks),
    )
    for named in archived:
        if named.record is not None:
            _tombstone_archived(conn, named.record, now)
    conn.execute(  # a tombstone names them now; the archived identity goes with the line (m012)
        "DELETE FROM archived WHERE EXISTS (SELECT 1 FROM messages m WHERE m.id IN (SELECT value FROM json_each(?))"
        " AND m.session_rowid = archived.session_rowid AND m.content_hash = archived.content_hash)",
        (marks,),
    )
    removed = delete_messages(conn, ids)
    for session_id in sessions:
        _forget_summaries(conn, session_id)
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('optimize')")  # rewrites the segments
    return removed


def delete_messages(conn: Connection, ids: Sequence[int]) -> int:
    """Delete messages with their vectors and backlog entries (the FTS trigger drops their index rows)."""
    conn.execute("PRAGMA secure_delete = ON")
    keep_ids_given(conn, ids)  # a forgotten message's citation is never given to a new one
    marks = json.dumps(list(ids))
    texts = conn.execute("SELECT text FROM messages WHERE id IN (SELECT value FROM json_each(?))", (marks,))
    keys = [(cache_key(str(row[0])),) for row in texts.fetchall()]  # the cached embedding of its text goes too
    conn.executemany("DELETE FROM embedding_cache WHERE text_hash = ?", keys)
    vectors.delete(conn, ids)  # sqlite-vec zeroes the deleted codes in place; secure_delete wipes freed pages
    conn.execute("DELETE FROM embedding_backlog WHERE message_id IN (SELECT value FROM json_each(?))", (marks,))
    return int(conn.execute("DELETE FROM messages WHERE id IN (SELECT value FROM json_each(?))", (marks,)).rowcount)


def honour(conn: Connection, session_id: str, content_hash: bytes, window_key: str | None, at: float) -> bool:
    """Record an imported tombstone and forget what it names here; False when the store already had it."""
    cursor = conn.execute(
        "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
        " VALUES (?, ?, ?, NULL, ?)",
        (session_id, content_hash, window_key, at),
    )
    if not cursor.rowcount:
        return False
    shared.drop_archived_identity(SQLITE, conn, session_id, content_hash)
    rows = conn.execute(
        "SELECT m.id FROM messages m JOIN sessions s ON s.id = m.session_rowid WHERE s.session_id = ?"
        " AND (m.content_hash = ? OR (? IS NOT NULL AND m.window_key = ?))",
        (session_id, content_hash, window_key, window_key),
    ).fetchall()
    delete_messages(conn, [int(r[0]) for r in rows])
    return True


def _tombstone_archived(conn: Connection, record: dict[str, Any], now: float) -> None:
    dated = is_dated(record)
    with contextlib.suppress(ValueError, TypeError):
        shared.drop_archived_identity(SQLITE, conn, str(record["sessionId"]), bytes.fromhex(str(record["contentHash"])))
        conn.execute(
            "INSERT OR IGNORE INTO forgotten (session_id, content_hash, window_key, message_id, forgotten_at)"
            " VALUES (?, ?, ?, ?, ?)",
            (
                str(record["sessionId"]),
                bytes.fromhex(str(record["contentHash"])),
                record.get("windowKey") if dated else None,
                record.get("id"),
                now,
            ),
        )


def is_dated(record: dict[str, Any]) -> bool:
    """Whether an archive line's message carries a finite numeric timestamp: only then does its window key name
    it in a tombstone (as ``window_key`` does for a stored one). Both backends tombstone archived lines by it."""
    message = record.get("message")
    stamp = message.get("timestamp") if isinstance(message, dict) else None
    return isinstance(stamp, int | float) and not isinstance(stamp, bool) and math.isfinite(stamp)


def _forget_summaries(conn: Connection, session_id: str) -> None:
    """A session forgotten whole loses its compaction summaries (the host's words about it) and snapshots."""
    row = conn.execute("SELECT id FROM sessions WHERE session_id = ?", (session_id,)).fetchone()
    if row is None:
        return
    conn.execute("DELETE FROM snapshots WHERE session_rowid = ?", (row[0],))
    conn.execute("DELETE FROM compactions WHERE session_rowid = ?", (row[0],))


def zero_old_free_space(db: Database) -> None:
    """On a store written before every write connection zeroed what it freed, rebuild the file once
    (``VACUUM``): free blocks left by rows an UPDATE moved may hold any message's old bytes, a forgotten one's
    too. A store created since, or rebuilt once, is marked and never rebuilt again (decision 0100)."""
    if meta.get(db.reader(), FREE_SPACE_ZEROED) is not None:
        return
    with db.writer() as conn:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # an older file takes it at the rebuild
        conn.execute("VACUUM")
    db.write(lambda conn: meta.put(conn, FREE_SPACE_ZEROED, "1"))


def scrub_files(db: Database) -> bool:
    """Empty the WAL (its frames still hold the old pages) and give free pages back; True when it emptied.

    A TRUNCATE checkpoint waits for readers (busy timeout); a reader holding an old snapshot for longer makes
    it report busy, and it is tried again a few times.
    """
    with db.writer() as conn:
        conn.execute("PRAGMA incremental_vacuum")
        for _ in range(5):
            busy = int(conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0])
            if not busy:
                return True
            time.sleep(0.2)
    return False


def rewrite_archives(conn: Connection, archive_dir: Path) -> int:
    """Rewrite every archive holding a tombstoned message without its line (atomically, 0600); returns how many."""
    return rewrite_archive_files(archive_dir, lambda raws: _tombstoned(conn, raws))


def rewrite_archive_files(archive_dir: Path, tombstoned: Callable[[list[bytes]], set[int]]) -> int:
    """Rewrite each archive file in the folder without the lines ``tombstoned`` names (their positions in the
    file's lines), atomically and 0600; returns how many files were rewritten.

    Both backends rewrite archives through it and supply only the tombstone lookup, so which lines go, how a
    damaged line is kept and how the file is replaced are one rule."""
    rewritten = 0
    for path in archive_files(archive_dir):
        with gzip.open(path, "rb") as handle:
            raws = list(handle)
        dead = tombstoned(raws)
        if dead:
            write_gzip(path, [raw for n, raw in enumerate(raws) if n not in dead], path.with_suffix(".forget-partial"))
            rewritten += 1
    return rewritten


def _tombstoned(conn: Connection, raws: list[bytes]) -> set[int]:
    """The positions of the lines a tombstone names."""
    return {
        n
        for n, session_id, digest in line_identities(raws)
        if conn.execute(
            "SELECT 1 FROM forgotten WHERE session_id = ? AND content_hash = ?", (session_id, digest)
        ).fetchone()
        is not None
    }


def line_identities(raws: list[bytes]) -> Iterator[tuple[int, str, bytes]]:
    """(position, session, content hash) of each archive line that names a message; a damaged line names none
    and is kept as it is (by both backends' rewrites)."""
    for n, raw in enumerate(raws):
        try:
            record = json.loads(raw)
            yield n, str(record["sessionId"]), bytes.fromhex(str(record["contentHash"]))
        except (ValueError, KeyError, TypeError):
            continue


def write_gzip(path: Path, lines: Iterable[bytes], partial: Path) -> None:
    """Write ``lines`` gzip-compressed to ``partial`` (0600), complete (the gzip trailer written) and fsynced,
    then rename it over ``path`` and fsync the folder: a reader, or a crash, finds the old file or the whole
    new one, never a part. ``partial`` is removed when the writing fails (``lines`` raising too): an archive not
    finished is no archive.

    Every archive file is written through it, new or rewritten, by either backend (a prune's archive, a forget's
    rewrite), so they are all as durable as the most careful of them.
    """
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as out:
            for line in lines:
                out.write(line)
            out.close()
            raw.flush()
            os.fsync(raw.fileno())
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)
    fsync_dir(path.parent)


def fsync_dir(folder: Path) -> None:
    """Make a rename durable: the directory's entry is on disk before what depends on it (a removal) runs."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def run(
    db: Database, index: ForgettingIndex | None, archive_dir: Path, selector: Selector, *, dry_run: bool
) -> Forgotten:
    """Plan, then (unless ``dry_run``) forget exactly what the plan shows; the view lists every message."""
    found = plan(db.reader(), archive_dir, selector)
    view = found.view(dry_run=dry_run, full_text=selector.match is not None)
    if dry_run:
        return view
    removed, rewritten, truncated = forget(db, index, archive_dir, found)
    return replace(view, removed=removed, archive_files_rewritten=rewritten, wal_truncated=truncated)
