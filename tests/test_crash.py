"""Acknowledged means durable: SIGKILL the sidecar again and again under load, then count what survived.

A driver commits turns over real HTTP from several sessions in parallel, as fast as it can, and does what
the host does with a turn it got no answer for: re-delivers it with the same advancement key until it is
acknowledged (``committed``, or ``duplicate`` when the lost answer was for a stored turn). Meanwhile the
real ``serve`` process, with the real local model embedding the backlog, is killed with SIGKILL at random
moments (some while it is still starting) and restarted. At the end every acknowledged turn must be stored
exactly once, the store must pass its integrity check (SQLite's ``integrity_check`` and FTS5's, or amcheck on
PostgreSQL), full-text and vector indexes must match the messages, and the backlog must drain. On the suite's
PostgreSQL pass the same test runs against a PostgreSQL store (the served sidecar inherits the settings that
name it); several sidecars killed at once are ``tests/postgres/test_many_sidecars.py``.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.store.sqlite.connection import open_connection
from tests.helpers import keyword_rows, make_settings, store_rows
from tests.reliability import SidecarProcess, record

KILLS = 20
SESSIONS = 4
RETRYABLE_STATUSES = {500, 502, 503, 504, 507}


def turn_body(session: str, n: int) -> dict[str, object]:
    stamp = 1_700_000_000_000 + n * 60_000
    return {
        "advancementKey": f"{session}:turn:{n}",
        "sessionId": session,
        "sessionKey": f"agent:crash:{session}",
        "messages": [
            {"role": "user", "content": f"question {n} from {session}: token q{session}x{n}", "timestamp": stamp},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": f"answer {n} for {session}: token a{session}x{n}"}],
                "timestamp": stamp + 1000,
            },
        ],
    }


class Driver:
    """One session's host: commits turn after turn; an unanswered turn is re-delivered with the same key."""

    def __init__(self, server: SidecarProcess, session: str, stop: threading.Event) -> None:
        self.server, self.session, self.stop = server, session, stop
        self.acknowledged: dict[str, str] = {}
        self.retries = 0
        self.unexpected: list[str] = []
        self.thread = threading.Thread(target=self.run, name=f"driver-{session}", daemon=True)

    def run(self) -> None:
        n = 0
        client: httpx.Client | None = None
        while not self.stop.is_set():
            n += 1
            body = turn_body(self.session, n)
            while True:  # a turn is abandoned never: the host keeps it until the engine acknowledges it
                try:
                    client = client or self.server.client(timeout=5)
                    response = client.post("/v1/hooks/commit-turn", json=body)
                except (httpx.HTTPError, OSError):
                    client = None
                    self.retries += 1
                    time.sleep(0.05)
                    continue
                if response.status_code == 200:
                    self.acknowledged[str(body["advancementKey"])] = response.json()["status"]
                    break
                if response.status_code not in RETRYABLE_STATUSES:
                    self.unexpected.append(f"{response.status_code} {response.text[:200]}")
                    return
                self.retries += 1
                time.sleep(0.05)


@pytest.mark.slow
def test_sigkill_under_load_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    server = SidecarProcess(tmp_path / "state")
    stop = threading.Event()
    drivers = [Driver(server, f"s{k}", stop) for k in range(SESSIONS)]
    server.spawn().wait_healthy()
    for driver in drivers:
        driver.thread.start()
    kills = 0
    began = time.monotonic()
    try:
        for _ in range(KILLS):
            if rng.random() < 0.2:
                time.sleep(rng.uniform(0.0, 1.0))  # somewhere in start-up: imports, migration, model, index load
            else:
                server.wait_healthy()
                time.sleep(rng.uniform(0.1, 0.9))
            server.kill()
            kills += 1
            server.spawn()
        server.wait_healthy()
        stop.set()
        for driver in drivers:
            driver.thread.join(60)
            assert not driver.thread.is_alive(), "a driver could not get its last turn acknowledged"
        assert [d.unexpected for d in drivers] == [[]] * SESSIONS
        killed_for = time.monotonic() - began
        with server.client() as client:
            deadline = time.monotonic() + 180
            while client.get("/stats").json()["backlog"] > 0:
                assert time.monotonic() < deadline, "the embedding backlog did not drain"
                time.sleep(0.2)
        drained_for = time.monotonic() - began - killed_for
    finally:
        stop.set()
        server.stop()

    acknowledged = {key: status for d in drivers for key, status in d.acknowledged.items()}
    settings = make_settings(server.state_dir)  # the store the served sidecar was on, either backend
    figures: dict[str, float] = dict(verify_store(settings, set(acknowledged)))
    figures |= {
        "kills": kills,
        "sessions": SESSIONS,
        "turnsAcknowledged": len(acknowledged),
        "acknowledgedAsDuplicate": sum(1 for s in acknowledged.values() if s == "duplicate"),
        "redeliveries": sum(d.retries for d in drivers),
        "killPhaseS": round(killed_for, 1),
        "drainS": round(drained_for, 1),
    }
    record("crash" if settings.database_url is None else "crash-postgresql", figures)
    assert kills >= KILLS
    assert len(acknowledged) > KILLS, "the driver got too few turns through to prove anything"
    assert figures["turnsLost"] == 0
    assert figures["duplicates"] == 0


def verify_store(settings: Settings, acknowledged: set[str]) -> dict[str, int]:
    """Count lost and duplicated turns and messages, and assert the store and its indexes are sound."""
    assert_sound(settings)

    def rows(sql: str) -> list[tuple[object, ...]]:
        return store_rows(settings, sql)

    stored_keys = [str(r[0]) for r in rows("SELECT advancement_key FROM turns")]
    per_turn = {
        str(key): int(str(count))
        for key, count in rows(
            "SELECT t.advancement_key, count(m.id) FROM turns t LEFT JOIN messages m ON m.turn_rowid = t.id"
            " GROUP BY t.id, t.advancement_key"
        )
    }
    texts = Counter(str(r[0]) for r in rows("SELECT text FROM messages"))
    messages = sum(texts.values())
    vectors = int(str(rows("SELECT count(*) FROM message_vectors")[0][0]))
    orphans = rows("SELECT count(*) FROM message_vectors WHERE message_id NOT IN (SELECT id FROM messages)")[0][0]
    backlog = rows("SELECT count(*) FROM embedding_backlog")[0][0]
    for message_id, text in rows("SELECT id, text FROM messages ORDER BY random() LIMIT 50"):
        token = str(text).rsplit("token ", 1)[1]  # every message is found by its own unique token
        assert keyword_rows(settings, token) == [message_id], f"full-text index out of step for msg:{message_id}"
    lost = acknowledged - set(stored_keys)
    assert not lost, f"acknowledged turns lost: {sorted(lost)[:10]}"
    assert len(stored_keys) == len(set(stored_keys))
    assert set(stored_keys) == acknowledged, "a turn is stored that was never acknowledged"
    short = {k: n for k, n in per_turn.items() if n != 2}
    assert not short, f"turns without exactly their two messages: {list(short.items())[:10]}"
    duplicated = sum(n - 1 for n in texts.values() if n > 1)
    assert vectors == messages and orphans == 0 and backlog == 0, (vectors, messages, orphans, backlog)
    return {
        "turnsStored": len(stored_keys),
        "turnsLost": len(lost),
        "duplicates": duplicated,
        "messages": messages,
        "vectors": vectors,
    }


def assert_sound(settings: Settings) -> None:
    """The store's own integrity checks: SQLite's ``integrity_check`` and FTS5's index check of the file, or on
    PostgreSQL amcheck over every table and B-tree/GIN index (the suite's role is a superuser)."""
    if settings.database_url is None:
        conn = open_connection(settings.database_path, readonly=True)
        try:
            assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            conn.close()
        fts_check(settings.database_path)
        return
    from openclaw_lossless.store.postgres import checks
    from openclaw_lossless.store.postgres.connection import Database

    db = Database(settings.database_url.get_secret_value(), schema=settings.database_schema)
    try:
        assert checks.amcheck_usable(db.reader())
        assert checks.integrity_problems(db.reader()) == ["ok"]
    finally:
        db.close()


def fts_check(path: Path) -> None:
    """FTS5's own integrity check of the index against the messages (rolled back: it writes nothing)."""
    conn = open_connection(path)
    try:
        conn.execute("BEGIN")
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        conn.execute("ROLLBACK")
    finally:
        conn.close()
