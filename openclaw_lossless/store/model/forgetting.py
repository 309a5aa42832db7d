"""Forgetting as both backends do it: what a selection names, what it found, and the archive files it rewrites.

The rules that need no SQL live here (the selection's checks, the plan, the archives' gzip rewrite), so a
forget means the same on SQLite and on PostgreSQL; each backend finds and deletes the rows in its own SQL.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from openclaw_lossless.errors import BadRequest, NotFound

WORD = re.compile(r"\w+", re.UNICODE)
EXCERPT_CHARS = 80


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


def named_row(row: Sequence[Any], archive: str | None = None, record: dict[str, Any] | None = None) -> Named:
    return Named(int(row[0]), float(row[1]), str(row[2]), str(row[3]), str(row[4]), str(row[5]), archive, record)


def archived_named(archive_dir: Path, selector: Selector, stored: set[int]) -> Iterator[Named]:
    """Archived message lines the selection names (a keyword match looks at the hot store only)."""
    if selector.match is not None:
        return
    wanted = set(selector.ids)
    for path in archive_files(archive_dir):
        for record in _lines(path):
            if record is None or "type" in record or int(record.get("id") or 0) in stored:
                continue
            if _archived_match(record, selector, wanted):
                yield named_row(
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


def is_dated(record: dict[str, Any]) -> bool:
    """Whether an archive line's message carries a finite numeric timestamp: only then does its window key name
    it in a tombstone (as ``window_key`` does for a stored one). Both backends tombstone archived lines by it."""
    message = record.get("message")
    stamp = message.get("timestamp") if isinstance(message, dict) else None
    return isinstance(stamp, int | float) and not isinstance(stamp, bool) and math.isfinite(stamp)


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


def archive_files(archive_dir: Path) -> list[Path]:
    return sorted(archive_dir.glob("*.jsonl.gz")) if archive_dir.is_dir() else []


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


def fsync_dir(folder: Path) -> None:
    """Make a rename durable: the directory's entry is on disk before what depends on it (a removal) runs."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_selector(selector: Selector) -> None:
    """What makes a selection unusable before any store is read (both backends then look up its session or agent)."""
    if selector.empty() and not selector.everything:
        raise BadRequest("name what to forget: citations (msg:N), a session, an agent, a time range or a match")
    if selector.match is not None and not WORD.search(selector.match):
        raise BadRequest("the match has no words to search for: nothing was forgotten")
    if selector.since is not None and selector.until is not None and selector.since > selector.until:
        raise BadRequest("the time range ends before it starts: nothing was forgotten")
    if any(i <= 0 for i in selector.ids):
        raise BadRequest("a citation is msg:N with N a whole number of 1 or more")
