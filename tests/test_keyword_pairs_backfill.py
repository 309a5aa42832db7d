"""An existing store gains the keyword pairs of its stored messages resumably: killed half-way, it goes on.

A store is written as the release before the pairs left it (its migrations, rows through its triggers): 30,000
messages, most of them Chinese sentences whose words the keyword index holds only as whole sentences. A real
``serve`` process upgrades it: the migration changes the schema at once and the server pairs the stored
messages in the background, newest first, a batch per transaction. While it does, keyword search answers
for the space-separated text and for the messages already paired; ``/stats`` shows how far it has come. The
process is SIGKILLed half-way; started again, it goes on from its cursor and finishes: every Chinese message
paired once, the index holding each message once, a word inside the sentences found in every message that
holds it, and the progress in the log. Both backends.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.harness import SidecarProcess
from openclaw_lossless.config import Settings
from openclaw_lossless.sidecar import place_of
from openclaw_lossless.store.backend import connect
from tests.helpers import make_settings, on_postgres, store_rows

MESSAGES = 30_000
WORD_EVERY = 600  # every 600th message holds 王府井: 50 of them
NEWEST = "最新的消息：明天下午在新宿车站见面。"


def text_of(i: int) -> str:
    if i == MESSAGES - 1:
        return NEWEST
    if i % 4 == 0:
        return f"Deploy note {i}: the ferry to the island leaves at noon from pier {i % 17}."
    place = "王府井" if i % WORD_EVERY == 1 else "西单"
    return f"第{i}号记录：我们下周要去{place}附近开会，然后去杭州看朋友，周末回来。"


CHINESE = sum(1 for i in range(MESSAGES) if i % 4 != 0 or i == MESSAGES - 1)
WITH_WORD = sum(1 for i in range(MESSAGES) if i % WORD_EVERY == 1 and i % 4 != 0)


def write_release_store(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store as the release before the pairs wrote it: its migrations only, its columns, its triggers."""
    place = place_of(settings)
    settings.state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(settings.state_dir, 0o700)
    if place.url is None:
        from openclaw_lossless.store.sqlite import migrations
    else:
        from openclaw_lossless.store.postgres import migrations  # type: ignore[no-redef]
    before = [fn for fn in migrations.MIGRATIONS if not fn.__name__.endswith("_unspaced_grams")]
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "MIGRATIONS", before)
        store = connect(place)
    rows = [(1_767_225_600 + i, 1_767_225_600 + i, text_of(i), text_of(i).encode(), f"w{i}") for i in range(MESSAGES)]
    try:
        store.db.write(lambda conn: fill(conn, rows, postgres=place.url is not None))
    finally:
        store.db.close()


def fill(conn: Any, rows: Sequence[tuple[Any, ...]], *, postgres: bool) -> None:
    mark = "%s" if postgres else "?"
    conn.execute(
        "INSERT INTO sessions (session_id, session_key, agent_id, created_at, last_seen_at)"
        " VALUES ('s-old', 'agent:main:main', 'main', 1, 1)"
    )
    sql = (
        "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original, content_hash,"
        f" window_key, tokens) SELECT id, 'main', 'user', {mark}, {mark}, {mark}, '{{}}', {mark}, {mark}, 1"
        " FROM sessions WHERE session_id = 's-old'"
    )
    (conn.cursor() if postgres else conn).executemany(sql, rows)


def search(client: httpx.Client, word: str, k: int = 200) -> list[dict[str, Any]]:
    answer = client.get("/v1/search", params={"q": word, "mode": "keyword", "k": k})
    assert answer.status_code == 200, answer.text
    hits: list[dict[str, Any]] = answer.json()["hits"]
    return hits


def pairs_progress(client: httpx.Client) -> dict[str, int] | None:
    progress: dict[str, int] | None = client.get("/stats").json()["keywordPairs"]
    return progress


def waiting(settings: Settings) -> str | None:
    rows = store_rows(settings, "SELECT value FROM meta WHERE key = 'keyword_pairs_backfill'")
    return str(rows[0][0]) if rows else None


def test_the_pairs_backfill_resumes_after_a_kill_and_finishes_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(tmp_path / "state")
    write_release_store(settings, monkeypatch)
    assert store_rows(settings, "SELECT count(*) FROM messages") == [(MESSAGES,)]
    log = tmp_path / "sidecar.log"
    server = SidecarProcess(
        settings.state_dir, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}, args=["--log-level", "info"], log=log
    )
    server.spawn()
    try:
        server.wait_healthy(timeout=120)
        with server.client() as client:
            deadline = time.monotonic() + 120
            while (progress := pairs_progress(client)) is not None and progress["done"] == 0:
                assert time.monotonic() < deadline, "the backfill never started"
                time.sleep(0.01)
            assert progress is not None, "the backfill finished before it could be seen: nothing was resumed"
            assert progress["total"] == MESSAGES
            # Meanwhile: the newest messages are paired first, and the spaced text is found as before
            assert [hit["text"] for hit in search(client, "新宿", k=3)] == [NEWEST]
            ferry = search(client, "ferry", k=5)
            assert len(ferry) == 5 and all("ferry" in hit["text"] for hit in ferry)
        server.kill()
    finally:
        server.stop()
    cursor = waiting(settings)
    assert cursor is not None, "killed after the backfill ended: nothing left to resume"
    paired = store_rows(settings, "SELECT count(*) FROM messages WHERE grams IS NOT NULL")[0][0]
    assert 0 < paired < CHINESE  # committed batches stayed; the rest waits

    server.spawn()
    try:
        server.wait_healthy(timeout=120)
        with server.client() as client:
            deadline = time.monotonic() + 300
            while pairs_progress(client) is not None:
                assert time.monotonic() < deadline, "the backfill did not finish after the restart"
                time.sleep(0.2)
            hits = search(client, "王府井")
            assert len(hits) == WITH_WORD and len({hit["id"] for hit in hits}) == WITH_WORD
            assert all("王府井" in hit["text"] for hit in hits)
            assert [hit["text"] for hit in search(client, "新宿", k=3)] == [NEWEST]
    finally:
        server.stop()
    assert waiting(settings) is None
    assert store_rows(settings, "SELECT count(*) FROM messages") == [(MESSAGES,)]
    assert store_rows(settings, "SELECT count(*) FROM messages WHERE grams IS NOT NULL") == [(CHINESE,)]
    if not on_postgres(settings):  # FTS5 checks its index against the messages: each entry once, as stored
        store_rows(settings, "INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        assert store_rows(settings, "SELECT count(*) FROM messages_fts_docsize") == [(MESSAGES,)]
    text = log.read_text()
    assert f"keyword pairs of older messages: 20000 of {MESSAGES} messages read" in text
    assert f"all {MESSAGES} messages read, the backfill is done" in text
