"""Import of export files, apart from SQL: the report, the read loop and the routing of each line.

Both backends' importers (``sqlite/transfer/importing.py``, ``postgres/transfer/importing.py``) supply only
the writes, so a file means the same on either store.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import zlib
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.model.subagents import outcome_identity
from openclaw_lossless.store.model.transfer.lines import (
    CompactionLine,
    ForgottenLine,
    Line,
    LinkLine,
    MessageLine,
    SessionLine,
    SnapshotLine,
    TurnLine,
    parse_line,
)

BATCH = 500


Outcome = Literal["new", "present", "conflict", "forgotten"]


ConnT = TypeVar("ConnT")


ConnT_contra = TypeVar("ConnT_contra", contravariant=True)


_COUNTER = {
    MessageLine: "imported",
    SessionLine: "sessions",
    TurnLine: "turns",
    CompactionLine: "compactions",
    SnapshotLine: "snapshots",
    LinkLine: "subagent_links",
    ForgottenLine: "tombstones",
}


@dataclass
class RestoreReport:
    """Lines read; rows each kind of line added; lines already in the store, in conflict, or malformed."""

    read: int = 0
    imported: int = 0  # messages
    sessions: int = 0
    turns: int = 0
    compactions: int = 0
    snapshots: int = 0
    subagent_links: int = 0
    tombstones: int = 0  # forgotten messages' identities the file carried and the store did not hold yet
    forgotten: int = 0  # message lines not imported: they were forgotten (``store/sqlite/forget.py``)
    already_present: int = 0
    conflicts: int = 0  # a snapshot name or a child's link the store holds with other content: the store's kept
    malformed: int = 0


class Unreadable(BadRequest):
    """The file cannot be opened, or stops being readable part way (a truncated or damaged gzip)."""


def read_in_batches(
    path: Path, options: CaptureOptions, report: RestoreReport, flush: Callable[[list[Line]], object]
) -> RestoreReport:
    """Read, check and parse the file, handing each full batch to ``flush`` (which writes and clears it).

    Both backends import through this loop and supply only ``flush``, their transaction, so what counts as
    read or malformed, the batch size, and what a damaged file keeps (the lines before the damage) are one
    rule: an import on either store of the same file reports the same counts.
    """
    if not path.is_file():
        raise BadRequest(f"no such file: {path}")
    batch: list[Line] = []
    try:
        for line in _checked(path, options, report):
            batch.append(line)
            if len(batch) >= BATCH:
                flush(batch)
    except Unreadable as exc:
        flush(batch)  # the lines read before the damage are imported
        raise Unreadable(f"{exc.message}; the {report.read} lines before it were imported") from exc
    flush(batch)
    return report


class LineWriter(Protocol[ConnT_contra]):
    """What an importer does with each kind of line, on its backend's connection (see ``apply_line``)."""

    def message(self, conn: ConnT_contra, line: MessageLine) -> Outcome: ...
    def session_line(self, conn: ConnT_contra, line: SessionLine) -> Outcome: ...
    def turn_line(self, conn: ConnT_contra, line: TurnLine) -> Outcome: ...
    def compaction(self, conn: ConnT_contra, line: CompactionLine) -> Outcome: ...
    def snapshot(self, conn: ConnT_contra, line: SnapshotLine) -> Outcome: ...
    def forgotten(self, conn: ConnT_contra, line: ForgottenLine) -> Outcome: ...
    def link(self, conn: ConnT_contra, line: LinkLine) -> Outcome: ...


def apply_line(writer: LineWriter[ConnT], conn: ConnT, line: Line) -> Outcome:
    """Hand the line to the writer's method for its kind: one routing for both backends' importers, so a kind
    of line added to ``lines.py`` is a type error in each until both write it."""
    if isinstance(line, MessageLine):
        return writer.message(conn, line)
    if isinstance(line, SessionLine):
        return writer.session_line(conn, line)
    if isinstance(line, TurnLine):
        return writer.turn_line(conn, line)
    if isinstance(line, CompactionLine):
        return writer.compaction(conn, line)
    if isinstance(line, SnapshotLine):
        return writer.snapshot(conn, line)
    if isinstance(line, ForgottenLine):
        return writer.forgotten(conn, line)
    return writer.link(conn, line)


_OUTCOME_COUNTER = {None: "malformed", "present": "already_present", "conflict": "conflicts", "forgotten": "forgotten"}


def count_outcome(report: RestoreReport, line: Line, outcome: Outcome | None) -> None:
    """Count a line's outcome (None: refused by the store) in the report; "new" counts by the line's kind.

    Shared by both backends so their reports for one file agree field by field."""
    counter = _OUTCOME_COUNTER.get(outcome, _COUNTER[type(line)])
    setattr(report, counter, getattr(report, counter) + 1)


def moved_id(moved: Mapping[int, int], exported: int | None) -> int | None:
    """The id an exported message or compaction has in this store: its new id if the import moved it."""
    return None if exported is None else moved.get(exported, exported)


def remember_move(moved: MutableMapping[int, int], exported: int, stored: int) -> None:
    """Remember only ids that changed: importing into an empty store remembers nothing."""
    if exported != stored:
        moved[exported] = stored


def message_record(line: MessageLine, moved_messages: Mapping[int, int]) -> tuple[int | None, MessageRecord]:
    """The message's cited id in this store and the record to store.

    A subagent's outcome names the message it cites, so its identity (``outcome_identity``) follows that
    message's new id when the import moved it; both backends store the same record for the same line."""
    cites = moved_id(moved_messages, line.cites)
    record = line.record
    if line.child_key is not None and cites is not None:  # an outcome names its cited message's new id
        original, digest = outcome_identity(line.child_key, cites)
        record = dataclasses.replace(record, original=original, content_hash=digest)
    return cites, record


def snapshot_name(line: SnapshotLine, compaction: int | None) -> str:
    """The snapshot's name in this store: an automatic one follows its compaction's new id (``compaction``, the
    id in this store or None when absent), so both backends name a moved compaction's snapshot alike."""
    if (
        line.automatic
        and compaction not in (None, line.compaction_id)
        and line.name == f"pre-compaction-{line.compaction_id}"
    ):
        return f"pre-compaction-{compaction}"
    return line.name


def _checked(path: Path, options: CaptureOptions, report: RestoreReport) -> Iterator[Line]:
    """The file's lines, parsed and captured; blank lines skipped, malformed ones counted."""
    for raw in _read(path):
        if raw.strip():
            report.read += 1
            line = parse_line(raw, options)
            if line is None:
                report.malformed += 1
            else:
                yield line


def _read(path: Path) -> Iterator[bytes]:
    """The file's lines as bytes (decoded one by one, so one bad byte costs one line, not the import)."""
    try:
        handle = _open(path)
    except OSError as exc:
        raise Unreadable(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        try:
            yield from handle
        except (OSError, EOFError, zlib.error) as exc:  # gzip: not gzip, truncated, or a damaged block
            raise Unreadable(f"cannot read {path} past its first lines: {exc}") from exc


def _open(path: Path) -> io.BufferedIOBase:
    if path.suffix == ".gz":
        return gzip.open(path, "rb")
    return path.open("rb")
