"""Counts that agree: after a forget, an archive move under the size cap, a redaction rescan and a catch-up
import, ``/stats``, ``/metrics``, the status page and the database itself show the same number of messages,
vectors, forgotten and archived messages, without a restart.

Real parts: the app over HTTP (the status page through a logged-in browser session), SQLite with sqlite-vec;
the database is read with its own connection, not through the app.
"""

from __future__ import annotations

import gzip
import json
import re
from typing import Any

import httpx

from tests.helpers import LiveSidecar, store_rows
from tests.test_history_import import Transcript
from tests.test_history_import import write_jsonl as write_transcript
from tests.test_ui import browser, log_in

SESSION = "3c9d2e41-1b7a-4f0e-8c55-7a2b1d0e9f61"
KEY = "agent:main:main"
T0 = 1_780_000_000_000


def _database(server: LiveSidecar) -> dict[str, int]:
    one = {
        "messages": "SELECT count(*) FROM messages",
        "vectors": "SELECT count(*) FROM message_vectors",
        "forgotten": "SELECT count(*) FROM forgotten",
        "archived": "SELECT coalesce(sum(message_count), 0) FROM archives",
    }
    return {name: int(store_rows(server.settings, sql)[0][0]) for name, sql in one.items()}


def _stats(server: LiveSidecar) -> dict[str, int]:
    stats = server.client.get("/stats").json()
    return {
        "messages": stats["messages"],
        "vectors": stats["vectors"],
        "forgotten": stats["forgotten"],
        "archived": stats["archive"]["archivedMessages"],
    }


def _metric(text: str, name: str) -> int:
    found = re.search(rf"^{name} ([0-9.e+]+)$", text, re.MULTILINE)
    assert found, name
    return int(float(found.group(1)))


def _metrics(server: LiveSidecar) -> dict[str, int]:
    text = server.client.get("/metrics").text
    return {"messages": _metric(text, "lossless_messages"), "vectors": _metric(text, "lossless_vector_index_vectors")}


def _page(ui: httpx.Client) -> dict[str, int]:
    page = ui.get("/ui").text

    def count(key: str) -> int:
        found = re.search(rf'id="count-{key}">([0-9,]+)<', page)
        assert found, key
        return int(found.group(1).replace(",", ""))

    archived = re.search(r"<dt>Archived messages</dt><dd>([0-9,]+)</dd>", page)
    assert archived, re.findall(r"Archived messages.{0,80}", page)
    return {
        "messages": count("messages"),
        "vectors": count("vectors"),
        "forgotten": count("forgotten"),
        "archived": int(archived.group(1).replace(",", "")),
    }


def _agree(server: LiveSidecar, ui: httpx.Client, when: str) -> dict[str, int]:
    server.wait_for_backlog()
    truth = _database(server)
    assert truth["vectors"] == truth["messages"], f"{when}: the backlog drained, every message has its vector"
    assert _stats(server) == truth, f"{when}: /stats"
    metrics = _metrics(server)
    assert metrics == {"messages": truth["messages"], "vectors": truth["vectors"]}, f"{when}: /metrics"
    assert _page(ui) == truth, f"{when}: the status page"
    return truth


def test_stats_metrics_status_page_and_database_agree_after_each_change(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    entries = []
    for n in range(12):
        entries += [transcript.user(f"Question {n} about the boat engine."), transcript.assistant(f"Answer {n}.")]
        body = {
            "advancementKey": f"count-turn-{n}",
            "sessionId": SESSION,
            "sessionKey": KEY,
            "messages": [e["message"] for e in entries[-2:]],
        }
        assert sidecar.post("commit-turn", body).status_code == 200
    with browser(sidecar) as ui:
        log_in(ui, sidecar)
        before = _agree(sidecar, ui, "after the commits")
        assert before["messages"] == 24

        gone = sidecar.client.post("/v1/forget", json={"ids": ["msg:20", "msg:21"]})
        assert gone.status_code == 200, gone.text
        after_forget = _agree(sidecar, ui, "after a forget")
        assert (after_forget["messages"], after_forget["forgotten"]) == (22, 2)

        cap = sidecar.sidecar.size_cap
        cap.max_db_size_mb = sidecar.sidecar.db.file_bytes() * 0.7 / 1_000_000
        cap.check(force=True)
        after_archive = _agree(sidecar, ui, "after an archive move under the size cap")
        assert after_archive["archived"] > 0
        assert after_archive["messages"] + after_archive["archived"] == 22

        assert sidecar.client.post("/v1/redact/rescan", json={}).status_code == 200
        _agree(sidecar, ui, "after a rescan")

        sessions = sidecar.settings.openclaw_state / "agents" / "main" / "sessions"
        entries += [transcript.user("A late question the plugin never sent."), transcript.assistant("A late reply.")]
        write_transcript(sessions / f"{SESSION}.jsonl", [transcript.header(), *entries])
        (sessions / "sessions.json").write_text(json.dumps({"main": {"sessionId": SESSION, "updatedAt": T0}}))
        sidecar.sidecar.catch_up.catch_up_now("main", SESSION)
        after_import = _agree(sidecar, ui, "after a catch-up import")
        assert after_import["messages"] >= after_archive["messages"] + 2  # the two new ones at least


def _commit_and_archive(sidecar: LiveSidecar, transcript: Transcript) -> list[dict[str, Any]]:
    """Twelve turns committed, then the oldest moved to an archive under the size cap; the transcript's entries."""
    entries: list[dict[str, Any]] = []
    for n in range(12):
        entries += [transcript.user(f"Question {n} about the boat engine."), transcript.assistant(f"Answer {n}.")]
        body = {
            "advancementKey": f"count-turn-{n}",
            "sessionId": SESSION,
            "sessionKey": KEY,
            "messages": [e["message"] for e in entries[-2:]],
        }
        assert sidecar.post("commit-turn", body).status_code == 200
    sidecar.wait_for_backlog()
    cap, store = sidecar.sidecar.size_cap, sidecar.sidecar.store
    with cap._lock:  # a check a commit started in the background ends first (a forced one skips while it runs)
        cap.max_db_size_mb = store.ops.archive.used_bytes(store.db.reader()) * 0.7 / (1024 * 1024)
    cap.check(force=True)
    assert _database(sidecar)["archived"] > 0
    return entries


def _archive_lines(sidecar: LiveSidecar) -> list[dict[str, Any]]:
    found = []
    for path in sorted(sidecar.settings.archive_dir.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            found += [json.loads(line) for line in handle]
    return sorted(found, key=lambda line: int(line["id"]))


def test_catch_up_after_an_archive_move_stores_only_new_messages(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    entries = _commit_and_archive(sidecar, transcript)
    archived = _database(sidecar)
    assert archived["archived"] > 0
    sessions = sidecar.settings.openclaw_state / "agents" / "main" / "sessions"
    entries += [transcript.user("A late question the plugin never sent."), transcript.assistant("A late reply.")]
    write_transcript(sessions / f"{SESSION}.jsonl", [transcript.header(), *entries])
    (sessions / "sessions.json").write_text(json.dumps({"main": {"sessionId": SESSION, "updatedAt": T0}}))
    sidecar.sidecar.catch_up.catch_up_now("main", SESSION)
    assert _database(sidecar)["messages"] == archived["messages"] + 2  # the archived ones are not stored twice
    sidecar.sidecar.catch_up.catch_up_now("main", SESSION)  # a second catch-up finds nothing new either
    assert _database(sidecar)["messages"] == archived["messages"] + 2


def test_an_archived_message_is_not_stored_again_by_a_replayed_turn_nor_a_resent_message(
    sidecar: LiveSidecar,
) -> None:
    entries = _commit_and_archive(sidecar, Transcript(SESSION, T0))
    before = _database(sidecar)
    first = [e["message"] for e in entries[:2]]  # turn 0: archived (the oldest go first)
    assert [line["message"] for line in _archive_lines(sidecar)[:2]] == first

    replay = {"advancementKey": "count-turn-0", "sessionId": SESSION, "sessionKey": KEY, "messages": first}
    again = sidecar.post("commit-turn", replay)
    retold = sidecar.post("commit-turn", replay | {"advancementKey": "count-turn-0-retold"})
    resent = sidecar.post("ingest-batch", {"sessionId": SESSION, "sessionKey": KEY, "messages": first})

    assert [r.status_code for r in (again, retold, resent)] == [200, 200, 200], (again.text, retold.text, resent.text)
    assert _database(sidecar) == before  # neither the same turn nor its messages under another key


def test_a_forgotten_archived_message_leaves_no_identity_and_an_archive_restored_keeps_none(
    sidecar: LiveSidecar,
) -> None:
    """The archived identities are the message's session and content hash only, and each goes when its message
    is forgotten (its tombstone says it then) or imported back from the archive (its row says it then)."""
    _commit_and_archive(sidecar, Transcript(SESSION, T0))
    lines = _archive_lines(sidecar)
    identities = store_rows(sidecar.settings, "SELECT * FROM archived")
    assert len(identities) == len(lines) == _database(sidecar)["archived"]
    assert {len(row) for row in identities} == {3}  # session, content hash, id: no text
    assert {bytes(row[1]).hex() for row in identities} == {line["contentHash"] for line in lines}

    gone = sidecar.client.post("/v1/forget", json={"ids": [f"msg:{lines[0]['id']}"]})
    assert gone.status_code == 200, gone.text
    left = store_rows(sidecar.settings, "SELECT message_id FROM archived ORDER BY message_id")
    assert [int(row[0]) for row in left] == [line["id"] for line in lines[1:]]

    store = sidecar.sidecar.store
    reports = [
        store.ops.transfer.restore_jsonl(store.db, path, sidecar.sidecar.capture_options)
        for path in sorted(sidecar.settings.archive_dir.glob("*.jsonl.gz"))
    ]
    assert sum(r.imported for r in reports) == len(lines) - 1 and sum(r.malformed for r in reports) == 0
    assert store_rows(sidecar.settings, "SELECT count(*) FROM archived") == [(0,)]
