"""A reader of SQLite's file format that trusts nothing: what ``salvage`` uses when SQLite itself gives up.

SQLite refuses a file whose schema page or b-tree interior pages are damaged ("database disk image is
malformed"), even though most of its rows still sit intact in leaf pages. Python has no binding for
SQLite's own recovery API, so this module reads the file the way that API does: page by page, newest
committed version of each page taken from the WAL, table b-trees walked from the roots the schema names,
and every leaf page's cells decoded into ``(rowid, values)``. A page or cell that does not parse is counted
and skipped, never guessed at. Format reference: https://www.sqlite.org/fileformat2.html
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HEADER_MAGIC = b"SQLite format 3\x00"
LEAF_TABLE, INTERIOR_TABLE = 0x0D, 0x05
WAL_HEADER, WAL_FRAME_HEADER = 32, 24
Row = tuple[int, list[Any]]


class DamagedPage(Exception):
    """A page or cell that does not parse as the format says it must."""


@dataclass
class PageFile:
    """The pages of a database file, each in its newest committed version (WAL frames over the main file)."""

    data: bytes
    page_size: int
    usable: int
    wal: dict[int, bytes] = field(default_factory=dict)
    header_ok: bool = True

    @classmethod
    def open(cls, path: Path) -> PageFile:
        data = path.read_bytes()
        header_ok = data[:16] == HEADER_MAGIC
        page_size, reserved = 4096, 0
        if header_ok:
            raw = struct.unpack(">H", data[16:18])[0]
            page_size = 65536 if raw == 1 else raw
            reserved = data[20]
            if page_size < 512 or page_size & (page_size - 1):
                page_size, reserved, header_ok = 4096, 0, False
        pages = cls(data, page_size, page_size - reserved, header_ok=header_ok)
        wal = Path(f"{path}-wal")
        if wal.exists():
            pages.wal = _committed_wal_pages(wal.read_bytes(), page_size)
        return pages

    @property
    def count(self) -> int:
        return max(len(self.data) // self.page_size, max(self.wal, default=0))

    def page(self, number: int) -> bytes:
        """Page ``number`` (1-based); a page past the end of a truncated file is damaged."""
        if number in self.wal:
            return self.wal[number]
        start = (number - 1) * self.page_size
        if number < 1 or start + self.page_size > len(self.data):
            raise DamagedPage(f"page {number} is beyond the end of the file")
        return self.data[start : start + self.page_size]

    def freelist(self) -> set[int]:
        """Pages SQLite has freed: their old rows were deleted (or archived) and must not come back."""
        if not self.header_ok:
            return set()
        first = struct.unpack(">I", self.page(1)[32:36])[0]
        free: set[int] = set()
        trunk = first
        while trunk and trunk not in free:
            try:
                body = self.page(trunk)
            except DamagedPage:
                break
            free.add(trunk)
            count = struct.unpack(">I", body[4:8])[0]
            if count > (self.usable - 8) // 4:
                break
            free.update(struct.unpack(f">{count}I", body[8 : 8 + 4 * count]))
            trunk = struct.unpack(">I", body[0:4])[0]
        return free

    def leaves(self, root: int) -> tuple[list[int], int]:
        """The leaf pages of the table b-tree at ``root``, and how many of its pages could not be read."""
        leaves: list[int] = []
        damaged, seen, stack = 0, set(), [root]
        while stack:
            number = stack.pop()
            if number in seen:
                damaged += 1
                continue
            seen.add(number)
            try:
                kind, children = self._children(number)
            except DamagedPage:
                damaged += 1
                continue
            if kind == LEAF_TABLE:
                leaves.append(number)
            stack.extend(reversed(children))
        return leaves, damaged

    def _children(self, number: int) -> tuple[int, list[int]]:
        page, offset = self.page(number), 100 if number == 1 else 0
        kind = page[offset]
        if kind == LEAF_TABLE:
            return kind, []
        if kind != INTERIOR_TABLE:
            raise DamagedPage(f"page {number} is not a table b-tree page")
        cells = self._cell_offsets(page, offset, 12)
        children = [struct.unpack(">I", page[c : c + 4])[0] for c in cells]
        children.append(struct.unpack(">I", page[offset + 8 : offset + 12])[0])
        if any(not 1 <= child <= self.count for child in children):
            raise DamagedPage(f"page {number} points outside the file")
        return kind, children

    def _cell_offsets(self, page: bytes, offset: int, header: int) -> list[int]:
        count = struct.unpack(">H", page[offset + 3 : offset + 5])[0]
        start = offset + header
        if start + 2 * count > self.usable:
            raise DamagedPage("cell count runs past the page")
        cells = list(struct.unpack(f">{count}H", page[start : start + 2 * count]))
        if any(not start + 2 * count <= c < self.usable for c in cells):
            raise DamagedPage("cell pointer outside the page")
        return cells

    def is_leaf(self, number: int) -> bool:
        try:
            page = self.page(number)
        except DamagedPage:
            return False
        return page[100 if number == 1 else 0] == LEAF_TABLE

    def rows(self, number: int) -> tuple[list[Row], int]:
        """The decoded rows of leaf page ``number``, and how many of its cells could not be decoded."""
        page, offset = self.page(number), 100 if number == 1 else 0
        if page[offset] != LEAF_TABLE:
            raise DamagedPage(f"page {number} is not a table leaf")
        rows: list[Row] = []
        bad = 0
        for cell in self._cell_offsets(page, offset, 8):
            try:
                rows.append(self._cell(page, cell))
            except (DamagedPage, IndexError, struct.error, UnicodeDecodeError):
                bad += 1
        return rows, bad

    def _cell(self, page: bytes, at: int) -> Row:
        size, at = varint(page, at)
        rowid, at = varint(page, at)
        payload = self._payload(page, at, size)
        return _signed(rowid), record(payload)

    def _payload(self, page: bytes, at: int, size: int) -> bytes:
        usable = self.usable
        most = usable - 35
        if size <= most:
            return page[at : at + size]
        least = ((usable - 12) * 32 // 255) - 23
        local = least + (size - least) % (usable - 4)
        if local > most:
            local = least
        parts = [page[at : at + local]]
        remaining, overflow, seen = size - local, struct.unpack(">I", page[at + local : at + local + 4])[0], set()
        while remaining > 0:
            if overflow in seen or not overflow:
                raise DamagedPage("overflow chain is broken")
            seen.add(overflow)
            chunk = self.page(overflow)
            take = min(remaining, usable - 4)
            parts.append(chunk[4 : 4 + take])
            remaining -= take
            overflow = struct.unpack(">I", chunk[0:4])[0]
        return b"".join(parts)


def varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's big-endian varint: 7 bits a byte, the ninth byte all 8."""
    value = 0
    for n in range(9):
        byte = data[at + n]
        if n == 8:
            return (value << 8) | byte, at + 9
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + n + 1
    raise DamagedPage("varint too long")  # pragma: no cover


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def record(payload: bytes) -> list[Any]:
    """Decode one record (header of serial types, then the values)."""
    header_size, at = varint(payload, 0)
    if header_size > len(payload):
        raise DamagedPage("record header runs past its payload")
    types: list[int] = []
    while at < header_size:
        serial, at = varint(payload, at)
        types.append(serial)
    body, values = header_size, []
    for serial in types:
        value, body = _value(payload, body, serial)
        values.append(value)
    if body != len(payload):
        raise DamagedPage("record body does not match its header")
    return values


def _value(payload: bytes, at: int, serial: int) -> tuple[Any, int]:
    if serial == 0:
        return None, at
    if serial in _INT_SIZES:
        size = _INT_SIZES[serial]
        if at + size > len(payload):
            raise DamagedPage("integer runs past the record")
        return int.from_bytes(payload[at : at + size], "big", signed=True), at + size
    if serial == 7:
        return struct.unpack(">d", payload[at : at + 8])[0], at + 8
    if serial in (8, 9):
        return serial - 8, at
    if serial < 12:
        raise DamagedPage(f"reserved serial type {serial}")
    size = (serial - 12) // 2 if serial % 2 == 0 else (serial - 13) // 2
    if at + size > len(payload):
        raise DamagedPage("value runs past the record")
    raw = payload[at : at + size]
    return (bytes(raw) if serial % 2 == 0 else raw.decode("utf-8", "surrogatepass")), at + size


def _committed_wal_pages(wal: bytes, page_size: int) -> dict[int, bytes]:
    """The newest version of each page in committed WAL frames (frames after the last commit are ignored)."""
    if len(wal) < WAL_HEADER or struct.unpack(">I", wal[8:12])[0] != page_size:
        return {}
    salts = wal[16:24]
    frame_size = WAL_FRAME_HEADER + page_size
    pending: dict[int, bytes] = {}
    committed: dict[int, bytes] = {}
    for start in range(WAL_HEADER, len(wal) - frame_size + 1, frame_size):
        frame = wal[start : start + frame_size]
        if frame[8:16] != salts:
            break  # a frame left over from before the last checkpoint reset
        number, commit_size = struct.unpack(">II", frame[:8])
        pending[number] = frame[WAL_FRAME_HEADER:]
        if commit_size:
            committed.update(pending)
            pending = {}
    return committed


def schema_roots(pages: PageFile) -> Iterator[tuple[str, int]]:
    """``(table name, root page)`` of every table the schema (sqlite_master, rooted at page 1) still names."""
    leaves, _ = pages.leaves(1)
    for number in leaves:
        try:
            rows, _ = pages.rows(number)
        except DamagedPage:
            continue
        for _, values in rows:
            if len(values) >= 4 and values[0] == "table" and isinstance(values[3], int):
                yield str(values[1]), values[3]
