"""A full disk: commits fail with 507 ``storage_full`` and change nothing, reads go on, and space heals it.

The disk is filled the way SQLite sees it: ``PRAGMA max_page_count`` on the sidecar's own write connection
caps the file, so a write that needs a new page fails with SQLITE_FULL ("database or disk is full"), the
same error a full filesystem gives. Freeing space is raising the cap again. The plugin side (a 507 makes
``commitTurn`` throw a retryable error so the host re-delivers the turn) is pinned by the shim's unit tests
(``plugin/test/shim.test.mjs``, "storage_full ... retryable").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.store.sqlite.connection import open_connection
from tests.conversation import FACT, QUESTION, commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, db_fingerprint, live_sidecar, make_settings
from tests.reliability import record


def set_page_cap(server: LiveSidecar, pages: int | None) -> int:
    """Cap the database at ``pages`` more pages than it has now (None: lift the cap); returns the cap."""
    with server.sidecar.db.writer() as conn:
        used = int(conn.execute("PRAGMA page_count").fetchone()[0])
        cap = 2**31 - 2 if pages is None else used + pages
        return int(conn.execute(f"PRAGMA max_page_count = {cap}").fetchone()[0])


def stored(path: Path) -> dict[str, Any]:
    """What a commit writes: every table but the embedding worker's own (it drains the backlog meanwhile)."""
    fingerprint = db_fingerprint(path)
    for table in ("embedding_backlog", "embedding_cache"):
        fingerprint["counts"].pop(table, None)
    return fingerprint


def big_turn(n: int) -> dict[str, Any]:
    """A turn of ~8 KB of distinct text, so a few of them need new pages."""
    words = " ".join(f"w{n}x{k}" for k in range(900))
    body = commit_body(conversation(1, session="s-full")[0], session="s-full")
    body["advancementKey"] = f"s-full:turn:{n}"
    body["messages"] = [{"role": "user", "content": f"filler {n}: {words}", "timestamp": 1_700_000_000_000 + n}]
    return body


# The full disk is SQLite's page cap on its one write connection; PostgreSQL's disk-full answer (507, nothing
# stored) is tests/postgres/backend/test_connection.py's.
@pytest.mark.sqlite_only
def test_a_full_disk_refuses_commits_with_507_keeps_reads_and_heals(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", max_db_size_mb=0)
    turns = conversation(30)
    with live_sidecar(settings, HashEmbedder()) as server:
        for turn in turns:
            assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
        server.wait_for_backlog()
        set_page_cap(server, 8)

        refused: dict[str, Any] | None = None
        accepted = 0
        for n in range(1, 200):
            before = stored(settings.database_path)
            response = server.post("commit-turn", big_turn(n))
            if response.status_code == 200:
                accepted += 1
                continue
            refused = assert_error(response, 507, "storage_full")
            assert stored(settings.database_path) == before, "a refused commit wrote something"
            break
        assert refused is not None, "the capped database never filled up"
        assert "full" in refused["error"]["message"] and "retry" in refused["error"]["message"]
        full_key = n

        # The host re-delivers the same turn: still refused, still nothing written.
        before = stored(settings.database_path)
        assert_error(server.post("commit-turn", big_turn(full_key)), 507, "storage_full")
        assert stored(settings.database_path) == before

        # Reads keep working while the disk is full.
        assert server.client.get("/healthz").status_code == 200
        assert server.client.get("/stats").json()["turns"] == 30 + accepted
        hits = server.client.get("/v1/search", params={"q": "staging password rotate"}).json()["hits"]
        assert any(h["text"] == FACT for h in hits)
        recalled = server.post(
            "assemble", {"sessionId": "s-other", "sessionKey": "agent:main:main", "messages": [], "prompt": QUESTION}
        )
        assert recalled.status_code == 200 and "rotates every Tuesday" in recalled.json()["systemPromptAddition"]
        recovered = server.client.get("/v1/sessions/s-main/messages", params={"last": 5})
        assert recovered.status_code == 200 and len(recovered.json()["messages"]) == 5

        # Space comes back: the re-delivered turn is stored, once, and so are new ones.
        set_page_cap(server, None)
        assert server.post("commit-turn", big_turn(full_key)).json()["status"] == "committed"
        assert server.post("commit-turn", big_turn(full_key)).json()["status"] == "duplicate"
        assert server.post("commit-turn", big_turn(full_key + 1)).json()["status"] == "committed"
        server.wait_for_backlog()
        stats = server.client.get("/stats").json()
        assert stats["turns"] == 30 + accepted + 2
        assert stats["vectors"] == stats["messages"]

    conn = open_connection(settings.database_path, readonly=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        keys = [r[0] for r in conn.execute("SELECT advancement_key FROM turns WHERE advancement_key LIKE 's-full:%'")]
        assert sorted(keys) == sorted(f"s-full:turn:{k}" for k in range(1, full_key + 2))
    finally:
        conn.close()
    record("diskFull", {"acceptedBeforeFull": accepted, "refusedWith": 507, "corrupted": 0, "healed": True})
