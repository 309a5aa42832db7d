"""Copy a whole store from one backend to another (a SQLite file to PostgreSQL, or back): ``migrate-store``.

Why through the export lines: both backends already write and read them with the same meaning (a store
exported from either gives the same bytes; an import treats them as untrusted, keeps ids when free and
stores nothing twice), so a copy is an export of the source read into the target, and nothing here knows
which backend is which. Each end is a ``Side``: its ``Database`` and its backend's transfer module.

Order: the source is exported once (one snapshot) into a work folder: the records (sessions, turns,
compactions, snapshots, subagent links, tombstones) in one file, the messages in id-ordered chunks. The
target takes the records first, so every session and turn exists with its exported times and counts
before a message arrives; then the chunks, each committed in batches by the import.

Resumable: into an empty target every id is kept, so the target's highest message id is where a copy cut
short stopped. A copy run again exports the source again, writes only the messages above that id (the
records are read again and found present), and so never stores a message twice. A target holding anything
else (its highest message is not the source's message of that id) is refused before anything is written, and
so is one whose records the source has since changed (a sidecar wrote to it between the runs): a record
present is not imported again, so such a copy could never pass its check.

Verified: every table's row count, and a SHA-256 over each kind of export line, are taken on both sides by
the same code; a difference is a ``CopyMismatch`` naming what differs, never a silent success (a source
written to during the copy shows up here: stop its sidecars first, or run the copy again).

Not copied: vectors (re-embedded from the target's backlog), the embedding cache, ``meta`` and the archive
records. Carried beside the lines: the highest message id the source has given, so no citation is reused.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from openclaw_lossless.capture.records import CaptureOptions
from openclaw_lossless.errors import BadRequest, LosslessError
from openclaw_lossless.store import api
from openclaw_lossless.store.model.transfer.export import ExportScope
from openclaw_lossless.store.model.transfer.restore import BATCH, RestoreReport

CHUNK = 10 * BATCH  # message lines a chunk file holds (the import commits them BATCH at a time)
TABLES = ("sessions", "turns", "messages", "compactions", "snapshots", "subagent_links", "forgotten")
# The kind of export line each table's rows become (the whole store's export has a line per row).
LINE_OF = {"sessions": "session", "turns": "turn", "messages": "message", "compactions": "compaction",
           "snapshots": "snapshot", "subagent_links": "subagentLink", "forgotten": "forgotten"}  # fmt: skip
_WHOLE = ExportScope()


@dataclass(frozen=True)
class Side:
    """One end of a copy: a store's units of work and its backend's export and import."""

    db: api.Database[Any]
    transfer: api.Transfer[Any, Any]


@dataclass(frozen=True)
class Tally:
    """What a store holds, as both ends measure it: rows per table, and per kind of export line its count
    and a SHA-256 over its lines in export order."""

    rows: dict[str, int]
    lines: dict[str, int]
    checksums: dict[str, str]


@dataclass
class CopyReport:
    """What a copy did: where it resumed (0: from the start), what the target took, and both ends' tallies."""

    resumed_after: int
    records: RestoreReport = field(default_factory=RestoreReport)
    messages: RestoreReport = field(default_factory=RestoreReport)
    source: Tally | None = None
    target: Tally | None = None

    def mismatches(self) -> list[str]:
        """Each difference between the two tallies, said as an operator would check it."""
        if self.source is None or self.target is None:
            return ["not verified"]
        found = []
        for what in ("rows", "lines", "checksums"):
            ours, theirs = getattr(self.source, what), getattr(self.target, what)
            for name in sorted(set(ours) | set(theirs)):
                if ours.get(name) != theirs.get(name):
                    found.append(f"{what} of {name}: source {ours.get(name)}, target {theirs.get(name)}")
        return found

    def source_changed(self) -> list[str]:
        """The source's tables whose rows, counted after the copy, differ from the lines its snapshot held:
        something wrote to the source while it was copied (a sidecar still running on it)."""
        if self.source is None:
            return []
        lines, rows = self.source.lines, self.source.rows
        return [table for table, kind in LINE_OF.items() if table in rows and rows[table] != lines.get(kind, 0)]


class CopyMismatch(LosslessError):
    """The target does not hold what the source does after the copy; the report says what differs."""

    def __init__(self, report: CopyReport) -> None:
        super().__init__("the copy does not match its source: " + "; ".join(report.mismatches()))
        self.report = report


def copy_store(
    source: Side,
    target: Side,
    options: CaptureOptions,
    *,
    chunk: int = CHUNK,
    progress: Callable[[int], object] | None = None,
    spool_dir: Path | None = None,
    stage: Callable[[str], object] | None = None,
) -> CopyReport:
    """Copy every record of ``source`` into ``target`` (empty, or holding a copy of it cut short), then verify.

    ``options`` are the capture options the target's sidecar uses (an import captures each message again,
    redacting as it would a committed one). ``progress`` is called with the messages copied after each chunk;
    ``stage`` with the name of each step as it begins (``export``, ``records``, ``messages``, ``verify``), so a
    caller can say what a long copy is doing between the progress calls.
    The export is spooled under ``spool_dir`` (default: the system's temporary folder), in a folder only this
    user can read, removed afterwards; it takes about the export file's size.
    Raises ``CopyMismatch`` when the verification finds a difference.
    """
    say = stage or (lambda _: None)
    report = CopyReport(resumed_after=_resume_point(source, target))
    resuming = count(target, "sessions") > 0
    with tempfile.TemporaryDirectory(prefix="lossless-copy-", dir=spool_dir) as work:
        say("export")
        digest = _Digest(keep_records=resuming)
        records, chunks = _spool(source, Path(work), report.resumed_after, chunk, digest)
        report.source = digest.tally()
        if resuming:
            _refuse_changed_source(target, digest.records)
        say("records")
        report.records = target.transfer.restore_jsonl(target.db, records, options)
        say("messages")
        copied = 0
        for path in chunks:
            done = target.transfer.restore_jsonl(target.db, path, options)
            report.messages = _added(report.messages, done)
            copied += done.read
            if progress:
                progress(copied)
        highest = source.transfer.highest_id_given(source.db.reader())
        target.db.write(lambda conn: target.transfer.give_ids_above(conn, highest))
    say("verify")
    report.target = tally(target)
    report.source = _with_rows(report.source, source)
    if report.mismatches():
        raise CopyMismatch(report)
    return report


def _resume_point(source: Side, target: Side) -> int:
    """The target's highest message id when the target holds a copy of the source cut short, else 0 (empty).

    A target holding anything else is refused: its ids would clash with the source's and resuming by id
    would skip messages.
    """
    highest = _scalar(target, "SELECT coalesce(max(id), 0) FROM messages")
    if highest == 0:  # empty, or cut short while taking the records: its sessions must all be the source's
        strangers = _session_ids(target) - _session_ids(source)
        if strangers:
            raise BadRequest(
                f"the target store holds sessions the source does not ({sorted(strangers)[0][:80]!r}):"
                " copy into an empty store"
            )
        return 0
    query = (
        "SELECT s.session_id, m.content_hash FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        f" WHERE m.id = {int(highest)}"
    )
    ours = source.db.reader().execute(query).fetchone()
    theirs = target.db.reader().execute(query).fetchone()
    if ours is None or theirs is None or (str(ours[0]), bytes(ours[1])) != (str(theirs[0]), bytes(theirs[1])):
        raise BadRequest(
            f"the target store holds other messages (its message {highest} is not the source's): copy into an"
            " empty store, or into the one an earlier copy of this source left"
        )
    return int(highest)


def _spool(source: Side, work: Path, after: int, chunk: int, digest: _Digest) -> tuple[Path, list[Path]]:
    """The source's export, once: records to one file, messages above ``after`` to chunk files; ``digest``
    takes its line counts and checksums from that same snapshot (rows are counted later, ``_with_rows``)."""
    records = work / "records.jsonl"
    chunks: list[Path] = []
    handle: IO[str] | None = None
    in_chunk = 0
    with records.open("w", encoding="utf-8") as record_file:
        for record in source.transfer.export_store(source.db.reader(), _WHOLE):
            kind = digest.add(source.transfer, record)
            if kind != "message":
                source.transfer.write_jsonl([record], record_file)
                continue
            if int(record["id"]) <= after:
                continue
            if handle is None or in_chunk >= chunk:
                handle = _next_chunk(handle, work, chunks)
                in_chunk = 0
            source.transfer.write_jsonl([record], handle)
            in_chunk += 1
    if handle is not None:
        handle.close()
    return records, chunks


def _refuse_changed_source(target: Side, source_records: set[bytes]) -> None:
    """Refuse to resume when a record the target took earlier is no longer the source's, before any write.

    Why: a record already present is not imported again, so a session the source went on writing to (its
    ``lastSeenAt``), or a link ended since (``endedAt``), would keep the target's older line, and the copy
    could never pass its check. Every record line of a target cut short came from an earlier export of this
    source, so unchanged it stands word for word in this one.
    """
    sink, changed = _LineSink(), None
    for record in target.transfer.export_store(target.db.reader(), _WHOLE):
        if "type" not in record:  # a message line: the resume point checked the messages
            continue
        target.transfer.write_jsonl([record], sink)
        line = sink.take()
        if changed is None and _line_key(line) not in source_records:
            changed = record
    if changed is not None:
        what = changed.get("sessionId") or changed.get("childSessionKey") or changed.get("name") or ""
        raise BadRequest(
            f"the source changed since this copy was cut short (its {changed['type']} {str(what)[:80]!r} is"
            " not what the target took; or the target captures with other redaction rules): copy into an"
            " empty store"
        )


def _line_key(line: bytes) -> bytes:
    return hashlib.blake2b(line, digest_size=16).digest()


def _next_chunk(handle: IO[str] | None, work: Path, chunks: list[Path]) -> IO[str]:
    if handle is not None:
        handle.close()
    chunks.append(work / f"messages-{len(chunks):06d}.jsonl")
    return chunks[-1].open("w", encoding="utf-8")


class _Digest:
    """Per kind of line: how many, and a SHA-256 over them as ``write_jsonl`` writes them."""

    def __init__(self, *, keep_records: bool = False) -> None:
        self.hashes: dict[str, Any] = {}
        self.counts: dict[str, int] = {}
        self.records: set[bytes] = set()  # with ``keep_records``: a short digest of each record line
        self._keep = keep_records
        self._line = _LineSink()

    def add(self, transfer: api.Transfer[Any, Any], record: dict[str, Any]) -> str:
        kind = str(record.get("type", "message"))
        transfer.write_jsonl([record], self._line)
        line = self._line.take()
        self.hashes.setdefault(kind, hashlib.sha256()).update(line)
        self.counts[kind] = self.counts.get(kind, 0) + 1
        if self._keep and kind != "message":
            self.records.add(_line_key(line))
        return kind

    def tally(self, rows: dict[str, int] | None = None) -> Tally:
        checksums = {kind: h.hexdigest() for kind, h in self.hashes.items()}
        return Tally(rows or {}, dict(self.counts), checksums)


class _LineSink:
    """A text stream holding the one line ``write_jsonl`` wrote last, as UTF-8 bytes."""

    def __init__(self) -> None:
        self._parts: list[str] = []

    def write(self, text: str) -> int:
        self._parts.append(text)
        return len(text)

    def take(self) -> bytes:
        line = "".join(self._parts).encode("utf-8", "surrogatepass")
        self._parts.clear()
        return line


def tally(side: Side) -> Tally:
    """A store's rows per table and the counts and checksums of its export lines (one snapshot)."""
    digest = _Digest()
    for record in side.transfer.export_store(side.db.reader(), _WHOLE):
        digest.add(side.transfer, record)
    return digest.tally(_rows(side))


def _with_rows(spooled: Tally, side: Side) -> Tally:
    return Tally(_rows(side), spooled.lines, spooled.checksums)


def count(side: Side, table: str) -> int:
    """How many rows one of the copied tables (``TABLES``) holds now, for a progress bar's total."""
    if table not in TABLES:
        raise ValueError(f"not a copied table: {table!r}")
    return _scalar(side, f"SELECT count(*) FROM {table}")


def _rows(side: Side) -> dict[str, int]:
    return {table: count(side, table) for table in TABLES}


def _session_ids(side: Side) -> set[str]:
    return {str(row[0]) for row in side.db.reader().execute("SELECT session_id FROM sessions").fetchall()}


def _scalar(side: Side, query: str) -> int:
    row = side.db.reader().execute(query).fetchone()
    return 0 if row is None else int(row[0])


def _added(total: RestoreReport, more: RestoreReport) -> RestoreReport:
    values = {name: getattr(total, name) + getattr(more, name) for name in vars(total)}
    return RestoreReport(**values)
