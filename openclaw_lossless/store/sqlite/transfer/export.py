"""Export: the store read out as JSONL lines, messages first, then the records that point into them.

The file's layout and why it is so are in this package's docstring (``store/sqlite/transfer/__init__.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from openclaw_lossless.store.model.transfer.export import (
    ExportScope,
    refuse_unstored,
)
from openclaw_lossless.store.sqlite.connection import Connection
from openclaw_lossless.store.statements.transfer.export import export_records, typed_records


def check_scope(conn: Connection, scope: ExportScope) -> None:
    """Refuse a scope naming no stored session: an empty export of a typo would look like a success."""
    where, params = scope.sessions()
    refuse_unstored(scope, lambda: conn.execute(f"SELECT 1 FROM sessions s WHERE {where} LIMIT 1", params).fetchone())


def export_store(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's messages, then its sessions, turns, compactions, snapshots and subagent links.

    Read in one transaction, so a sidecar writing meanwhile cannot leave a snapshot pointing past the
    messages exported.
    """
    conn.execute("BEGIN")
    try:
        where, params = scope.messages()
        yield from export_records(conn, where, params)
        yield from _typed_records(conn, scope)
    finally:
        conn.execute("COMMIT")


def _typed_records(conn: Connection, scope: ExportScope) -> Iterator[dict[str, Any]]:
    """The scope's sessions, turns, compactions and snapshots, then the subagent links touching its sessions."""
    where, params = scope.sessions()
    yield from typed_records(conn.execute, scope, where, params)
