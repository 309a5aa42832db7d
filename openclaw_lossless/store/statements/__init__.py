"""Statements both backends run alike, kept once: the domain's SQL written with ``?`` and a ``Dialect`` that
spells it for SQLite (``sqlite3``'s ``?``) or PostgreSQL (``psycopg``'s ``%s``).

Why: a statement spelt twice drifts (one backend gets the fix, the other not); kept once, a page of the web
UI's timeline or a rescan's page is one statement whatever the store. What truly differs (upserts, locks,
arrays, generated columns, FTS5) stays in ``store/sqlite/`` and ``store/postgres/``. Neither backend imports
the other; both import these. ``scripts/shared_lines.py`` counts what is still spelt twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Connection = Any  # sqlite3's or psycopg's: both run ``execute(sql, params)`` and answer rows as tuples


@dataclass(frozen=True)
class Dialect:
    """How one backend spells what the other spells differently."""

    name: str
    mark: str  # the placeholder
    false: str  # a false flag: SQLite stores 0, PostgreSQL a boolean
    locks_rows: bool  # SQLite runs one writer at a time, so a read inside a write needs no row lock

    def sql(self, text: str) -> str:
        """``text`` (``?`` placeholders, no literal ``%``) in this backend's placeholder style."""
        return text if self.mark == "?" else text.replace("?", self.mark)

    def lock(self, of: str = "") -> str:
        """The clause that locks the rows a read inside a write returns (of the table aliased ``of``), so another
        sidecar's write to them waits for this transaction: nothing on SQLite, whose writes already take turns."""
        return "" if not self.locks_rows else " FOR UPDATE" + (f" OF {of}" if of else "")


SQLITE = Dialect("sqlite", mark="?", false="0", locks_rows=False)
POSTGRES = Dialect("postgresql", mark="%s", false="false", locks_rows=True)
