"""The reads of snapshots and compactions both backends run alike: what the CLI, the UI and ``/stats`` list.

Writing them stays per backend (SQLite's ``lastrowid``, PostgreSQL's ``RETURNING`` and ``ON CONFLICT``); the
reads are the same statements in either placeholder style.
"""

from __future__ import annotations

from openclaw_lossless.store.model.snapshots import (
    CompactionListed,
    CompactionPoint,
    Snapshot,
    check_name,
    counts_by_status,
    snapshot_view,
)
from openclaw_lossless.store.statements import Connection, Dialect

_SNAPSHOT = (
    "SELECT sn.name, s.session_id, s.session_key, sn.last_message_id, sn.created_at, sn.automatic,"
    " sn.compaction_id FROM snapshots sn JOIN sessions s ON s.id = sn.session_rowid"
)
# A compaction's automatic snapshot: one at most; the first by id should an import ever bring two.
AUTOMATIC_NAME = "SELECT sn.name FROM snapshots sn WHERE sn.compaction_id = c.id ORDER BY sn.id LIMIT 1"


class SnapshotReads:
    """``last_message_id``, ``list_snapshots``, ``find_snapshot``, ``find_compaction``, ``list_compactions`` and
    ``compaction_counts`` (``api.Snapshots``) in one backend's dialect."""

    def __init__(self, dialect: Dialect) -> None:
        self.sql = dialect.sql

    def last_message_id(self, conn: Connection, session_rowid: int) -> int | None:
        """The session's newest message id (one step down its index by session), None while it holds none."""
        row = conn.execute(
            self.sql("SELECT max(id) FROM messages WHERE session_rowid = ?"), (session_rowid,)
        ).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def list_snapshots(self, conn: Connection) -> list[Snapshot]:
        return [snapshot_view(row) for row in conn.execute(f"{_SNAPSHOT} ORDER BY sn.id").fetchall()]

    def find_snapshot(self, conn: Connection, name: str) -> Snapshot | None:
        row = conn.execute(self.sql(f"{_SNAPSHOT} WHERE sn.name = ?"), (check_name(name),)).fetchone()
        return None if row is None else snapshot_view(row)

    def find_compaction(self, conn: Connection, compaction_id: int) -> CompactionPoint | None:
        row = conn.execute(
            self.sql(
                "SELECT c.id, s.session_id, c.last_message_id, c.recorded_at, c.tokens_before, c.tokens_after,"
                " c.summary, c.status, c.reason FROM compactions c JOIN sessions s ON s.id = c.session_rowid"
                " WHERE c.id = ?"
            ),
            (compaction_id,),
        ).fetchone()
        return None if row is None else CompactionPoint(*row)

    def list_compactions(self, conn: Connection, limit: int, status: str | None = None) -> list[CompactionListed]:
        """The ``limit`` latest compactions (of one status, or all), newest first, each with its automatic
        snapshot."""
        where, params = ("WHERE c.status = ?", [status]) if status is not None else ("", [])
        rows = conn.execute(
            self.sql(
                "SELECT c.id, c.recorded_at, c.status, c.reason, c.tokens_before, c.tokens_after, c.last_message_id,"
                f" ({AUTOMATIC_NAME}), s.session_id, s.agent_id"
                f" FROM compactions c JOIN sessions s ON s.id = c.session_rowid {where} ORDER BY c.id DESC LIMIT ?"
            ),
            [*params, limit],
        ).fetchall()
        return [CompactionListed(*row) for row in rows]

    def compaction_counts(self, conn: Connection) -> dict[str, int]:
        """How many recorded compactions came to each status (every status present, zero or not)."""
        return counts_by_status(conn.execute("SELECT status, count(*) FROM compactions GROUP BY status"))
