"""``salvage``: copy every row that can still be read from a damaged database into a new, sound one.

Why not SQLite: it refuses a file whose schema or interior pages are damaged, though most rows still sit
intact in leaf pages. So the source is read with ``salvage/file_format.py`` (the file format, not the library):
each table's b-tree is walked from the root the schema names, and leaf pages no surviving tree reaches are
matched to a table by the exact shape of their rows (column count and types), the way SQLite's own
recovery fills ``lost_and_found``. Freed pages are skipped so deleted or archived rows never come back.

The new file is built by this version's migrations, so its full-text index is rebuilt as rows go in (the
triggers) and its vectors are rebuilt by the sidecar's next start (the index identity is not copied). The
source is only read, and the output never overwrites anything.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openclaw_lossless.embed.index import IDENTITY_KEY
from openclaw_lossless.errors import BadRequest, StoreCorrupt
from openclaw_lossless.salvage.file_format import DamagedPage, PageFile, Row, schema_roots
from openclaw_lossless.store.sqlite import message_days
from openclaw_lossless.store.sqlite.archive import keep_identities_of_archives
from openclaw_lossless.store.sqlite.connection import Connection, Database, checkpoint_fully
from openclaw_lossless.store.sqlite.messages import give_ids_above
from openclaw_lossless.store.sqlite.migrations import migrate
from openclaw_lossless.store.sqlite.rebuild import (
    add_placeholder_sessions,
    allow_dangling_references,
    insert_rows,
    table_columns,
)

# In insert order: a row's parents go in before it. Their rows have shapes specific enough to be
# recognised on pages no tree reaches; meta and migrations are only taken from their own trees.
SHAPED = ("sessions", "turns", "messages", "compactions", "snapshots", "subagent_links", "archives")
# The tombstones go too (a forgotten message must stay forgotten: an old export imported into the salvaged
# store would otherwise bring it back), taken only from their own tree like meta.
TABLES = (*SHAPED, "meta", "forgotten")
# Tables keyed by message id that are not copied but witness which messages existed: one row per live
# message in the full-text index, and one per embedded message (sqlite-vec's rowids table, keyed by message id;
# ``message_vectors`` itself in a store written before migration m009).
WITNESSES = ("messages_fts_docsize", "message_vectors_rowids", "message_vectors")

Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    notnull: bool
    rowid: bool  # an INTEGER PRIMARY KEY: stored as NULL in the record, its value is the rowid
    default: Any = None  # the declared default's value (a column a migration added holds it for older rows)
    has_default: bool = False

    def accepts(self, value: Any) -> bool:
        if self.rowid:
            return value is None
        if value is None:
            return not self.notnull
        if self.type == "INTEGER":
            return type(value) is int
        if self.type == "REAL":
            return type(value) in (int, float)  # SQLite stores whole REAL values as integers
        if self.type == "TEXT":
            return isinstance(value, str)
        return isinstance(value, bytes)


@dataclass
class Scan:
    rows: dict[str, dict[int, list[Any]]]
    damaged_pages: int = 0
    bad_cells: int = 0
    stray_rows: int = 0
    witnessed: set[int] = field(default_factory=set)  # message ids the witness tables still name


def default_output(source: Path) -> Path:
    return source.with_name(f"{source.stem}-salvaged{source.suffix or '.sqlite'}")


def salvage(source: Path, out: Path, progress: Progress | None = None) -> dict[str, Any]:
    """Copy what can be read from ``source`` into the new file ``out``; returns the report."""
    _check_paths(source, out)
    pages = PageFile.open(source)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".salvage-") as work:
        building = Path(work) / "salvaged.sqlite"
        db = Database(building, synchronous="FULL")
        try:
            migrate(db)
            columns = {t: _columns(db.reader(), t) for t in TABLES}
            scan = _scan(pages, columns, progress)
            recovered = sum(len(rows) for rows in scan.rows.values())
            if recovered == 0:
                raise StoreCorrupt(
                    f"nothing could be read from {source}: it holds no readable rows of this store"
                    " (a backup or an export is the only way back)"
                )
            allow_dangling_references(db)  # a message may cite a turn that was lost: keep the message anyway
            seen = _witnessed(scan)
            placeholders = db.write(lambda conn: _insert(conn, scan, seen, columns))
            checkpoint_fully(db)
        finally:
            db.close()
        os.replace(building, out)
        os.chmod(out, 0o600)
    return _report(source, out, pages, scan, seen, placeholders)


def _check_paths(source: Path, out: Path) -> None:
    if not source.is_file():
        raise BadRequest(f"no database file at {source}; pass --db-path or --state-dir")
    if out.resolve() == source.resolve():
        raise BadRequest("--out must be a new file, not the damaged database itself")
    if out.exists() or Path(f"{out}-wal").exists():
        raise BadRequest(f"{out} already exists; salvage never overwrites: choose another --out")
    if not out.parent.is_dir():
        raise BadRequest(f"the directory of --out ({out.parent}) does not exist")


def _columns(conn: Connection, table: str) -> list[Column]:
    rows = table_columns(conn, table)
    single_pk = sum(1 for r in rows if r[5]) == 1
    return [
        Column(
            r[1], str(r[2]).upper(), bool(r[3]), bool(r[5]) and single_pk and r[2] == "INTEGER", *_default(r[4], r[3])
        )
        for r in rows
    ]


def _default(literal: str | None, not_null: object) -> tuple[Any, bool]:
    """A column's declared default as a value: a quoted string or a number (all this schema declares); NULL for
    a column that may be NULL and declares none (m011's ``grams``), as SQLite reads it for an older row."""
    if literal is None:
        return None, not not_null
    if len(literal) >= 2 and literal[0] == literal[-1] == "'":
        return literal[1:-1].replace("''", "'"), True
    try:
        return (float(literal) if "." in literal else int(literal)), True
    except ValueError:
        return None, False


def _fits(values: list[Any], columns: list[Column]) -> bool:
    return len(values) == len(columns) and all(c.accepts(v) for c, v in zip(columns, values, strict=True))


def _shaped(values: list[Any], columns: list[Column]) -> list[Any] | None:
    """The row as this table's columns, or None. A row written before a migration added columns (ALTER TABLE
    ADD COLUMN rewrites no row) is short on disk: SQLite reads its missing columns as their defaults, so does
    this. A row with more values than the columns was written by a newer version: its extra values go."""
    if len(values) < len(columns) and all(c.has_default for c in columns[len(values) :]):
        values = values + [c.default for c in columns[len(values) :]]
    elif len(values) > len(columns):
        values = values[: len(columns)]
    return values if _fits(values, columns) else None


def _scan(pages: PageFile, columns: dict[str, list[Column]], progress: Progress | None) -> Scan:
    scan = Scan(rows={t: {} for t in TABLES})
    roots = {name: root for name, root in schema_roots(pages) if name in columns}
    claimed: set[int] = set()
    total, done = pages.count, 0
    for table, root in roots.items():
        leaves, damaged = pages.leaves(root)
        scan.damaged_pages += damaged
        for number in leaves:
            claimed.add(number)
            _take(scan, table, _leaf_rows(pages, number, scan), columns[table])
            done += 1
            if progress:
                progress(done, total)
    free = pages.freelist()
    for number in range(1, total + 1):
        if number in claimed or number in free or not pages.is_leaf(number):
            continue
        for rowid, values in _leaf_rows(pages, number, scan):
            fitted = ((t, _shaped(values, columns[t])) for t in SHAPED if len(values) <= len(columns[t]))
            shaped, row = next(((t, row) for t, row in fitted if row is not None), (None, None))
            if shaped is not None and row is not None and rowid not in scan.rows[shaped]:
                scan.rows[shaped][rowid] = row
                scan.stray_rows += 1
        done += 1
        if progress:
            progress(min(done, total), total)
    if not roots:
        scan.damaged_pages += 1  # the schema page itself
    _witness(pages, scan)
    return scan


def _witness(pages: PageFile, scan: Scan) -> None:
    """Collect the message ids the witness tables hold (their damage is not the store's: not counted)."""
    for name, root in schema_roots(pages):
        if name not in WITNESSES:
            continue
        for number in pages.leaves(root)[0]:
            with contextlib.suppress(DamagedPage):
                scan.witnessed.update(rowid for rowid, _ in pages.rows(number)[0])


def _leaf_rows(pages: PageFile, number: int, scan: Scan) -> list[Row]:
    try:
        rows, bad = pages.rows(number)
    except DamagedPage:
        scan.damaged_pages += 1
        return []
    scan.bad_cells += bad
    return rows


def _take(scan: Scan, table: str, rows: list[Row], columns: list[Column]) -> None:
    for rowid, values in rows:
        shaped = _shaped(values, columns)
        if shaped is not None:
            scan.rows[table].setdefault(rowid, shaped)
        else:
            scan.bad_cells += 1


def _insert(conn: Connection, scan: Scan, seen: _Witnessed, columns: dict[str, list[Column]]) -> int:
    """Insert every recovered row under its own id; returns how many placeholder sessions were needed."""
    for table in TABLES:
        cols = columns[table]
        rows = [
            [rowid if c.rowid else v for c, v in zip(cols, values, strict=True)]
            for rowid, values in sorted(scan.rows[table].items())
            if not (table == "meta" and values[0] == IDENTITY_KEY)  # vectors are rebuilt, not trusted
        ]
        insert_rows(conn, table, [c.name for c in cols], rows)
    message_days.read_again(conn)  # derived from the messages: the server reads them again, not trusted here
    keep_identities_of_archives(conn)  # the archived messages' identities, read from the archives themselves
    give_ids_above(conn, seen.highest_given)
    return add_placeholder_sessions(conn)


@dataclass(frozen=True)
class _Witnessed:
    """What the surviving rows say of the messages the damaged store held above its archives."""

    archived_through: int  # the highest archived id
    newest: int  # the highest id read (``archived_through`` when none was)
    lost: set[int]  # ids named by a gap or a witness that were not read (never a forgotten one)
    forgotten: set[int]  # ids the tombstones name
    unnamed_newer: int  # messages the turns after the newest read one stored that no id above it names

    @property
    def highest_given(self) -> int:
        """The highest message id the damaged store is known to have given (read, witnessed, forgotten or
        archived, and one more per newer message no id names), so the salvaged one gives none of them again: a
        citation of a lost message must not come to name a new one."""
        return max([self.newest, *self.lost, *self.forgotten], default=0) + self.unnamed_newer


def _witnessed(scan: Scan) -> _Witnessed:
    messages, archives = scan.rows["messages"], scan.rows["archives"].values()
    archived_through = max((int(v[4]) for v in archives), default=0)
    forgotten = {int(v[4]) for v in scan.rows["forgotten"].values() if v[4] is not None}
    newest = max((i for i in messages if i > archived_through), default=archived_through)
    lost = set(range(archived_through + 1, newest + 1)) - messages.keys() - forgotten
    lost |= {i for i in scan.witnessed if i > archived_through} - messages.keys()
    after = messages[newest][3] if newest in messages else None
    unnamed = 0
    if after is not None:  # the turns after the newest read message's turn: all their messages are newer
        newer = sum(int(values[4]) for rowid, values in scan.rows["turns"].items() if rowid > after)
        unnamed = max(0, newer - sum(1 for i in lost | forgotten if i > newest))
    return _Witnessed(archived_through, newest, lost, forgotten, unnamed)


def _missing_messages(scan: Scan, seen: _Witnessed) -> int:
    """An estimate of the messages lost (a lower bound), from witnesses that survive apart from the messages.

    Message ids are dense apart from archived and forgotten ones, so a gap above the archived range is a lost
    message; the full-text index and the vectors name messages by id, so one they name that was not read is
    lost; and each recovered turn records how many messages it stored, so the turns committed after the one
    holding the newest message read lost all of theirs (the newest messages leave no gap), and a turn short
    of its messages lost some. The ids each witness names are counted once, however many name them. (A store
    salvaged before, whose lost ids were never given again, shows them as a gap: counted as lost again.)
    """
    messages, archives = scan.rows["messages"], scan.rows["archives"].values()
    held = Counter(int(v[3]) for v in messages.values() if v[3] is not None)
    short = sum(max(0, int(v[4]) - held[rowid]) for rowid, v in scan.rows["turns"].items())
    lost_ids = len(seen.lost) + seen.unnamed_newer
    return max(lost_ids, short - sum(int(v[5]) for v in archives) - len(seen.forgotten))


def _report(
    source: Path, out: Path, pages: PageFile, scan: Scan, seen: _Witnessed, placeholders: int
) -> dict[str, Any]:
    missing = _missing_messages(scan, seen)
    complete = pages.header_ok and not (scan.damaged_pages or scan.bad_cells or scan.stray_rows or missing)
    with contextlib.suppress(OSError):
        os.chmod(out, 0o600)
    return {
        "source": str(source),
        "out": str(out),
        "complete": complete,
        "recovered": {t: len(rows) for t, rows in scan.rows.items()},
        "pages": pages.count,
        "damagedPages": scan.damaged_pages,
        "unreadableRows": scan.bad_cells,
        "rowsFoundOffTree": scan.stray_rows,
        "messagesMissing": missing,
        "placeholderSessions": placeholders,
        "next": f"stop the sidecar, move {source} aside (with its -wal file), move {out} to {source}"
        " and start again; the vectors are rebuilt in the background",
    }
