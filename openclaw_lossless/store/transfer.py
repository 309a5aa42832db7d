"""Export and import of messages as JSONL: one message per line, with its full original object and metadata.

The format is also what archives (``archive.py``) write, so an archived slice comes back with
``import --jsonl``. Import keeps each record's id when it is free, so exporting a store, importing the file
into an empty store and exporting again gives the same bytes; a record already present (same session and
content) is skipped, so importing twice changes nothing.
"""

from __future__ import annotations

import gzip
import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.connection import Connection, Database
from openclaw_lossless.store.messages import queue_for_embedding
from openclaw_lossless.store.sessions import ensure_session

FORMAT = "openclaw-lossless/v1"
BATCH = 500
_REQUIRED = ("id", "sessionId", "role", "createdAt", "message", "text", "contentHash", "windowKey", "tokens")


def export_records(conn: Connection, where: str = "1", params: tuple[Any, ...] = ()) -> Iterator[dict[str, Any]]:
    """Every message matching ``where`` (over ``m`` messages, ``s`` sessions), oldest first."""
    cursor = conn.execute(
        "SELECT m.id, s.session_id, s.session_key, m.agent_id, m.role, m.kind, m.created_at, m.stored_at,"
        " m.original, m.text, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites,"
        " t.advancement_key FROM messages m JOIN sessions s ON s.id = m.session_rowid"
        f" LEFT JOIN turns t ON t.id = m.turn_rowid WHERE {where} ORDER BY m.id",
        params,
    )
    for row in cursor:
        yield {
            "format": FORMAT,
            "id": row[0],
            "sessionId": row[1],
            "sessionKey": row[2],
            "agentId": row[3],
            "role": row[4],
            "kind": row[5],
            "createdAt": row[6],
            "storedAt": row[7],
            "message": json.loads(row[8]),
            "text": row[9],
            "contentHash": bytes(row[10]).hex(),
            "windowKey": row[11],
            "tokens": row[12],
            "importance": row[13],
            "importanceLabel": row[14],
            "cites": row[15],
            "advancementKey": row[16],
        }


def scope_filter(agent: str | None, session: str | None) -> tuple[str, tuple[Any, ...]]:
    clauses, params = ["1"], []
    if agent:
        clauses.append("m.agent_id = ?")
        params.append(agent)
    if session:
        clauses.append("s.session_id = ?")
        params.append(session)
    return " AND ".join(clauses), tuple(params)


def write_jsonl(records: Iterable[dict[str, Any]], out: IO[str]) -> int:
    count = 0
    for record in records:
        out.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
        count += 1
    return count


@dataclass
class ImportReport:
    read: int = 0
    imported: int = 0
    already_present: int = 0
    malformed: int = 0


def open_lines(path: Path) -> IO[str]:
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8")
    return path.open(encoding="utf-8")


def import_jsonl(db: Database, path: Path, progress: Callable[[int], object] | None = None) -> ImportReport:
    """Bring messages back from an export or archive file; malformed lines are counted and skipped."""
    if not path.is_file():
        raise BadRequest(f"no such file: {path}")
    report = ImportReport()
    batch: list[dict[str, Any]] = []
    with open_lines(path) as lines:
        for line in lines:
            report.read += 1
            record = _parse(line)
            if record is None:
                report.malformed += 1
                continue
            batch.append(record)
            if len(batch) >= BATCH:
                _flush(db, batch, report, progress)
    _flush(db, batch, report, progress)
    return report


def _parse(line: str) -> dict[str, Any] | None:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    if not isinstance(record, dict) or any(key not in record for key in _REQUIRED):
        return None
    if not isinstance(record["message"], dict):
        return None
    return record


def _flush(
    db: Database, batch: list[dict[str, Any]], report: ImportReport, progress: Callable[[int], object] | None
) -> None:
    if not batch:
        return
    imported = db.write(lambda conn: _insert(conn, batch))
    report.imported += imported
    report.already_present += len(batch) - imported
    if progress:
        progress(len(batch))
    batch.clear()


def _insert(conn: Connection, records: list[dict[str, Any]]) -> int:
    new_ids: list[int] = []
    for record in records:
        session = ensure_session(conn, str(record["sessionId"]), record.get("sessionKey"))
        digest = bytes.fromhex(str(record["contentHash"]))
        if conn.execute(
            "SELECT 1 FROM messages WHERE session_rowid = ? AND content_hash = ?", (session.rowid, digest)
        ).fetchone():
            continue
        wanted = int(record["id"])
        free = conn.execute("SELECT 1 FROM messages WHERE id = ?", (wanted,)).fetchone() is None
        cursor = conn.execute(
            "INSERT INTO messages (id, session_rowid, agent_id, turn_rowid, role, kind, created_at, stored_at, text,"
            " original, content_hash, window_key, tokens, importance, importance_label, cites)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                wanted if free else None,
                session.rowid,
                session.agent_id,
                _turn(conn, record, session.rowid),
                record["role"],
                record.get("kind") or "message",
                float(record["createdAt"]),
                float(record.get("storedAt") or time.time()),
                record["text"],
                json.dumps(record["message"], sort_keys=True, separators=(",", ":"), ensure_ascii=False),
                digest,
                record["windowKey"],
                int(record["tokens"]),
                record.get("importance"),
                record.get("importanceLabel"),
                record.get("cites"),
            ),
        )
        new_ids.append(int(cursor.lastrowid))
    queue_for_embedding(conn, new_ids)
    return len(new_ids)


def _turn(conn: Connection, record: dict[str, Any], session_rowid: int) -> int | None:
    """The turn row for the record's advancement key, so a replay of that turn is still a duplicate."""
    key = record.get("advancementKey")
    if not key:
        return None
    row = conn.execute("SELECT id FROM turns WHERE advancement_key = ?", (key,)).fetchone()
    if row is not None:
        conn.execute("UPDATE turns SET message_count = message_count + 1 WHERE id = ?", (row[0],))
        return int(row[0])
    cursor = conn.execute(
        "INSERT INTO turns (advancement_key, session_rowid, committed_at, message_count) VALUES (?, ?, ?, 1)",
        (key, session_rowid, float(record.get("storedAt") or time.time())),
    )
    return int(cursor.lastrowid)
