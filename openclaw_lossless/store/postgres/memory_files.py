"""Workspace memory files on PostgreSQL: the SQLite module's calls (``store/sqlite/memory_files.py`` says why).

Removing chunks goes through forget's deletion (``forgetting.delete_messages``) and ``scrub`` through forget's
(``VACUUM`` of the touched tables and the keyword index rebuilt), so a replaced chunk leaves no text behind.
"""

from __future__ import annotations

from collections.abc import Sequence

from openclaw_lossless.store.model.memory_files import KIND, SESSION_PREFIX
from openclaw_lossless.store.postgres import forgetting, fulltext
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.statements import POSTGRES
from openclaw_lossless.store.statements.memory_files import FileRows

_ROWS = FileRows(POSTGRES)  # a file's row: the same statements on both backends
record_file = _ROWS.record_file
drop_file = _ROWS.drop_file
files = _ROWS.files
stored_chunks = _ROWS.stored_chunks


def sessions(conn: Connection) -> dict[str, int]:
    rows = conn.execute(
        "SELECT agent_id, id FROM sessions WHERE starts_with(session_id, %s)", (SESSION_PREFIX,)
    ).fetchall()
    return {str(agent): int(rowid) for agent, rowid in rows}


def mark_chunks(conn: Connection, ids: Sequence[int]) -> None:
    if ids:
        conn.execute("UPDATE messages SET kind = %s WHERE id = ANY(%s::bigint[])", (KIND, [int(i) for i in ids]))


def remove_chunks(conn: Connection, ids: Sequence[int]) -> int:
    return forgetting.delete_messages(conn, ids) if ids else 0


def scrub(db: Database) -> bool:
    fulltext.forget_counts()  # the kept word counts would exceed the corpus now smaller
    return forgetting.scrub(db, forgetting._TOUCHED)
