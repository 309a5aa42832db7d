"""The sidecar's own store, read-only, on whichever backend the run's environment names.

The e2e checks what the sidecar recorded, not what its API says, so it reads the store itself: the SQLite
file in the state dir, or, when the run's environment sets ``LOSSLESS_DATABASE_URL`` (the suite's PostgreSQL
pass), the schema ``LOSSLESS_DATABASE_SCHEMA`` names, in a read-only transaction. Statements are written
once, in the SQL both speak: ``?`` placeholders, double-quoted aliases, booleans tested as truth values.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class StoreReader:
    state_dir: Path
    url: str | None = None
    schema: str = "lossless"

    @classmethod
    def of(cls, state_dir: Path, env: Mapping[str, str]) -> StoreReader:
        url = env.get("LOSSLESS_DATABASE_URL") or None
        return cls(state_dir, url, env.get("LOSSLESS_DATABASE_SCHEMA") or "lossless")

    @property
    def backend(self) -> str:
        return "sqlite" if self.url is None else "postgresql"

    def exists(self) -> bool:
        """Whether the sidecar has created its store yet (a read never creates one)."""
        if self.url is None:
            return (self.state_dir / "lossless.sqlite").exists()
        found = self.rows('SELECT to_regclass(?) IS NOT NULL AS "there"', f'"{self.schema}".messages')
        return bool(found[0]["there"])

    def rows(self, sql: str, *params: Any) -> list[JsonObj]:
        if self.url is None:
            uri = f"{(self.state_dir / 'lossless.sqlite').as_uri()}?mode=ro"
            with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=10)) as conn:
                conn.row_factory = sqlite3.Row
                return [dict(row) for row in conn.execute(sql, params)]
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.url, row_factory=dict_row) as conn:
            conn.read_only = True
            conn.execute(f'SET search_path TO "{self.schema}", public')
            statement = sql.replace("%", "%%").replace("?", "%s")
            return list(conn.execute(statement, params or None).fetchall())
