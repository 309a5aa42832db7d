"""What each process of the multi-process tests does: it plays one sidecar with a pool of its own.

Top-level functions, so ``multiprocessing``'s spawn start method can import them in a fresh interpreter
(a forked child would share the parent's sockets). Each reports ``(name, outcome)`` on its queue: an error
is reported as text, so the test shows it instead of a hung child.
"""

from __future__ import annotations

import functools
import hashlib
import multiprocessing
import traceback
from collections.abc import Callable
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from typing import Any

from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.store.postgres import backlog, messages, migrations, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database

Report = tuple[str, Any]


def run(name: str, work: Callable[[], Any], results: Queue[Report]) -> None:
    try:
        results.put((name, work()))
    except Exception:  # the process edge: the test reads the traceback
        results.put((name, "error: " + traceback.format_exc()))


def migrate(name: str, url: str, schema: str, start: Barrier, results: Queue[Report]) -> None:
    db = Database(url, schema=schema, write_pool_size=1, read_pool_size=1)
    try:
        start.wait()
        run(name, lambda: migrations.migrate(db), results)
    finally:
        db.close()


def record(key: str, position: int) -> MessageRecord:
    """The message ``position`` of the turn committed under ``key``: the same in every process."""
    text = f"turn {key} message {position}: the heron fished at dawn"
    original = f'{{"content":"{text}","role":"user"}}'
    return MessageRecord(
        role="user", created_at=1_683_504_000.0 + position, text=text, original=original,
        content_hash=hashlib.sha256(original.encode()).digest(), window_key=f"{key}:{position}", tokens=12,
        importance=0.5, importance_label="normal", dated=True,
    )  # fmt: skip


def commit(conn: Connection, key: str, records: list[MessageRecord]) -> str:
    """What the hook's commit does in its one transaction: the session ensured, then the turn stored."""
    session = sessions.ensure_session(conn, "s-shared", "agent:main:shared")
    status, _ = messages.commit_turn(conn, session, key, records, heartbeat=False)
    return status


def commit_keys(
    name: str, url: str, schema: str, keys: list[str], per_turn: int, start: Barrier, results: Queue[Report]
) -> None:
    """Commit each key's turn as the hook would: the session ensured and the turn stored in one transaction."""
    db = Database(url, schema=schema, write_pool_size=2, read_pool_size=1)

    def commit_all() -> dict[str, str]:
        statuses: dict[str, str] = {}
        for key in keys:
            records = [record(key, position) for position in range(per_turn)]
            statuses[key] = db.write(functools.partial(commit, key=key, records=records))
        return statuses

    try:
        start.wait()
        run(name, commit_all, results)
    finally:
        db.close()


def claim_and_die(url: str, schema: str, limit: int, lease_s: float, results: Queue[Report]) -> None:
    """Claim rows as a worker would, report them, then wait to be killed without ever finishing them."""
    db = Database(url, schema=schema, write_pool_size=1, read_pool_size=1)
    rows = db.write(lambda conn: backlog.claim(conn, limit, worker="doomed", lease_s=lease_s))
    results.put(("doomed", [row[0] for row in rows]))
    multiprocessing.Event().wait()
