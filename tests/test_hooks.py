"""The hooks over real HTTP: durable turns, idempotency across restarts, ingest, compaction and subagents."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.config import Settings
from tests.conversation import QUESTION, commit_body, conversation
from tests.helpers import (
    HashEmbedder,
    LiveSidecar,
    db_fingerprint,
    live_sidecar,
    make_settings,
    on_postgres,
    store_rows,
)

MAIN = "agent:main:main"


def test_replaying_every_turn_is_duplicate_and_changes_nothing_even_after_restart(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    turns = conversation(200)
    with live_sidecar(settings, HashEmbedder()) as server:
        assert {server.post("commit-turn", commit_body(t)).json()["status"] for t in turns} == {"committed"}
        server.wait_for_backlog()
        before = db_fingerprint(settings)
        assert before["counts"]["messages"] == 400 and before["counts"]["turns"] == 200
        assert {server.post("commit-turn", commit_body(t)).json()["status"] for t in turns} == {"duplicate"}
        assert db_fingerprint(settings) == before
    with live_sidecar(settings, HashEmbedder()) as server:
        replies = [server.post("commit-turn", commit_body(t)).json() for t in turns]
        assert {r["status"] for r in replies} == {"duplicate"} and {r["stored"] for r in replies} == {0}
        assert db_fingerprint(settings) == before


def test_a_committed_turn_survives_a_restart_and_is_recoverable(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    turn = conversation(1)[0]
    with live_sidecar(settings, HashEmbedder()) as server:
        server.post("commit-turn", commit_body(turn))
    with live_sidecar(settings, HashEmbedder()) as server:
        recovered = server.client.get("/v1/sessions/s-main/messages", params={"last": 10}).json()
        assert [m["original"] for m in recovered["messages"]] == turn.messages
        assert recovered["agentId"] == "main"


def test_ingest_is_idempotent_on_message_identity(sidecar: LiveSidecar) -> None:
    message = {"role": "user", "content": "ingested once", "timestamp": 1_700_000_000_000}
    body = {"sessionId": "s-cli", "sessionKey": MAIN, "message": message}
    assert sidecar.post("ingest", body).json() == {"ingested": True}
    assert sidecar.post("ingest", body).json() == {"ingested": False}
    batch = {"sessionId": "s-cli", "sessionKey": MAIN, "messages": [message, {"role": "assistant", "content": "ok"}]}
    assert sidecar.post("ingest-batch", batch).json() == {"ingestedCount": 1}
    assert sidecar.post("after-turn", batch).json() == {"ingestedCount": 0}
    assert sidecar.client.get("/stats").json()["messages"] == 2


def test_an_undated_message_repeated_in_later_turns_is_stored_each_time_and_replays_store_nothing(
    tmp_path: Path,
) -> None:
    """Three turns in which the user answers "yes" (no timestamp) once stored one "yes": identity by content
    alone took the later ones for the first. Within a turn the advancement key already makes replays safe."""
    settings = make_settings(tmp_path / "state")

    def turn(n: int) -> dict[str, Any]:
        said = [{"role": "user", "content": "yes"}, {"role": "assistant", "content": "yes"}]
        return {"advancementKey": f"yes-{n}", "sessionId": "s-yes", "sessionKey": MAIN, "messages": said}

    with live_sidecar(settings, HashEmbedder()) as server:
        assert [server.post("commit-turn", turn(n)).json()["stored"] for n in range(3)] == [2, 2, 2]
        recovered = server.client.get("/v1/sessions/s-yes/messages", params={"last": 10}).json()["messages"]
        assert [(m["role"], m["text"]) for m in recovered] == [("user", "yes"), ("assistant", "yes")] * 3
        before = db_fingerprint(settings)
        assert {server.post("commit-turn", turn(n)).json()["status"] for n in range(3)} == {"duplicate"}
        assert db_fingerprint(settings) == before
    with live_sidecar(settings, HashEmbedder()) as server:
        assert {server.post("commit-turn", turn(n)).json()["stored"] for n in range(3)} == {0}
        assert db_fingerprint(settings) == before


def test_a_dated_message_keeps_its_content_identity_across_ingest_and_commit(sidecar: LiveSidecar) -> None:
    """An imported or ingested message and a committed copy of it are one message, as before."""
    dated = {"role": "user", "content": "the vault moved to rack 4", "timestamp": 1_700_000_000_000}
    assert sidecar.post("ingest", {"sessionId": "s-d", "sessionKey": MAIN, "message": dated}).json()["ingested"]
    body = {"advancementKey": "d-1", "sessionId": "s-d", "sessionKey": MAIN, "messages": [dated]}
    assert sidecar.post("commit-turn", body).json() == {"status": "committed", "stored": 0, "skippedHeartbeat": False}
    again = body | {"advancementKey": "d-2"}
    assert sidecar.post("commit-turn", again).json()["stored"] == 0
    assert sidecar.client.get("/stats").json()["messages"] == 1


def test_heartbeat_turns_are_skipped_unless_configured(sidecar: LiveSidecar) -> None:
    beat = {"role": "user", "content": "HEARTBEAT", "timestamp": 1}
    body = {"advancementKey": "hb-1", "sessionId": "s", "sessionKey": MAIN, "messages": [beat], "isHeartbeat": True}
    assert sidecar.post("commit-turn", body).json()["stored"] == 0
    assert sidecar.post("commit-turn", body).json()["status"] == "duplicate"
    kept = body | {"advancementKey": "hb-2", "config": {"skipHeartbeats": False}}
    assert sidecar.post("commit-turn", kept).json()["stored"] == 1


def test_bootstrap_is_cheap_and_idempotent(sidecar: LiveSidecar) -> None:
    body = {"sessionId": "s-boot", "sessionKey": MAIN}
    first = sidecar.post("bootstrap", body).json()
    again = sidecar.post("bootstrap", body).json()
    assert first["bootstrapped"] and again["bootstrapped"]
    assert (first["reason"], again["reason"]) == ("registered", "known")
    assert sidecar.client.get("/stats").json()["sessions"] == 1


def test_compaction_is_recorded_with_a_pre_compaction_snapshot(sidecar: LiveSidecar) -> None:
    for turn in conversation(3):
        sidecar.post("commit-turn", commit_body(turn))
    body = {
        "sessionId": "s-main",
        "sessionKey": MAIN,
        "tokensBefore": 9000,
        "tokensAfter": 1200,
        "summary": "## Goal\nShip it",
    }
    recorded = sidecar.post("compact", body).json()
    assert recorded["recorded"] and recorded["snapshot"].startswith("pre-compaction-")
    assert recorded["lastMessageId"] == 6
    stats = sidecar.client.get("/stats").json()
    assert (stats["compactions"], stats["snapshots"], stats["messages"]) == (1, 1, 6)


def test_a_failed_or_empty_host_compaction_is_recorded_as_such_not_counted_nor_snapshotted(
    sidecar: LiveSidecar,
) -> None:
    """The host answers ``{ok: false, compacted: false, reason}`` when its compaction fails and ``ok: true,
    compacted: false`` when there was nothing to compact: neither removed anything, so neither gets a
    ``pre-compaction-N`` snapshot or counts as a compaction; both stay on record with their reason."""
    for turn in conversation(2):
        sidecar.post("commit-turn", commit_body(turn))
    session = {"sessionId": "s-main", "sessionKey": MAIN}
    failed = sidecar.post("compact", session | {"ok": False, "compacted": False, "reason": "provider error 529"})
    nothing = sidecar.post("compact", session | {"ok": True, "compacted": False, "reason": "no real messages"})
    done = sidecar.post("compact", session | {"ok": True, "compacted": True, "tokensBefore": 900, "summary": "S"})
    assert (failed.json()["status"], failed.json()["snapshot"]) == ("failed", None)
    assert (nothing.json()["status"], nothing.json()["snapshot"]) == ("skipped", None)
    assert done.json()["status"] == "compacted"
    assert done.json()["snapshot"] == f"pre-compaction-{done.json()['compactionId']}"

    stats = sidecar.client.get("/stats").json()
    assert (stats["compactions"], stats["compactionFailures"], stats["snapshots"]) == (1, 1, 1)
    assert stats["compactionOutcomes"] == {"compacted": 1, "failed": 1, "skipped": 1, "not-compacted": 0}
    rows = store_rows(sidecar.settings, "SELECT status, compacted, reason FROM compactions ORDER BY id")
    assert [(status, int(compacted), reason) for status, compacted, reason in rows] == [
        ("failed", 0, "provider error 529"),
        ("skipped", 0, "no real messages"),
        ("compacted", 1, None),
    ]


def test_a_compaction_without_the_hosts_verdict_is_not_compacted_when_it_did_not_compact(
    sidecar: LiveSidecar,
) -> None:
    """An older plugin sends only ``compacted``: false cannot say whether it failed, and is no compaction."""
    answer = sidecar.post("compact", {"sessionId": "s-old", "sessionKey": MAIN, "compacted": False}).json()
    assert (answer["status"], answer["snapshot"]) == ("not-compacted", None)
    assert sidecar.client.get("/stats").json()["compactions"] == 0


GITHUB_TOKEN = "ghp_" + "R8x2Lq9Zt4Vb7Nc1Md5Kp3Wf6Hj0Gs2Ya8Ue"
DB_SECRET = "CorrectHorse" + "Battery9"  # split: a planted secret, not a credential


def test_a_compaction_summary_and_an_end_reason_are_stored_redacted(sidecar: LiveSidecar) -> None:
    """The host's summary retells the turns it replaced, secrets included; what is stored of it (and of the
    free-text reasons) is redacted like a message, so no secret reaches the database files."""
    sidecar.post("commit-turn", commit_body(conversation(1)[0]))
    summary = f"## Decisions\nDeploy with {GITHUB_TOKEN}; the staging db password={DB_SECRET} stays."
    body = {"sessionId": "s-main", "sessionKey": MAIN, "summary": summary, "reason": f"overflow near {GITHUB_TOKEN}"}
    assert sidecar.post("compact", body).json()["recorded"]
    child = "agent:main:subagent:9"
    sidecar.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": child})
    assert sidecar.post("subagent-ended", {"childSessionKey": child, "reason": f"failed: {GITHUB_TOKEN}"}).json()[
        "ended"
    ]

    [(stored_summary, reason)] = store_rows(sidecar.settings, "SELECT summary, reason FROM compactions")
    [(ended_reason,)] = store_rows(sidecar.settings, "SELECT ended_reason FROM subagent_links")
    assert stored_summary == (
        "## Decisions\nDeploy with [REDACTED:github_token]; the staging db password=[REDACTED:secret_assignment] stays."
    )
    assert (reason, ended_reason) == ("overflow near [REDACTED:github_token]", "failed: [REDACTED:github_token]")
    if not on_postgres(sidecar.settings):  # the SQLite files themselves: no page keeps the secret either
        raw = b"".join(path.read_bytes() for path in sidecar.settings.database_path.parent.glob("lossless.sqlite*"))
        assert GITHUB_TOKEN.encode() not in raw and DB_SECRET.encode() not in raw


def test_subagent_outcome_reaches_the_parent_and_rollback_undoes_a_spawn(sidecar: LiveSidecar) -> None:
    child = "agent:main:subagent:42"
    spawn = sidecar.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": child}).json()
    sidecar.post("commit-turn", commit_body(conversation(1)[0], session="s-parent"))
    child_turn = {
        "advancementKey": "child-1",
        "sessionId": "s-child",
        "sessionKey": child,
        "messages": [
            {"role": "user", "content": "Find which region hosts the audit bucket.", "timestamp": 1_700_000_000_000},
            {"role": "assistant", "content": "The audit bucket lives in eu-north-1.", "timestamp": 1_700_000_001_000},
        ],
    }
    assert sidecar.post("commit-turn", child_turn).json()["stored"] == 2
    ended = sidecar.post("subagent-ended", {"childSessionKey": child, "reason": "completed"}).json()
    assert ended == {"ended": True, "outcomesCopied": 1}
    assert (
        sidecar.post("subagent-ended", {"childSessionKey": child, "reason": "completed"}).json()["outcomesCopied"] == 0
    )
    sidecar.wait_for_backlog()
    parent_view = {
        "sessionId": "s-parent",
        "sessionKey": MAIN,
        "messages": [],
        "prompt": "audit bucket region?",
        "config": {"recallScope": "session"},
    }
    result = sidecar.post("assemble", parent_view).json()
    assert "[subagent result] The audit bucket lives in eu-north-1." in result["systemPromptAddition"]
    assert "Find which region" not in result["systemPromptAddition"]
    assert spawn["spawnId"] >= 1
    other = sidecar.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": "agent:main:subagent:43"})
    rollback = sidecar.post("subagent-spawn/rollback", {"spawnId": other.json()["spawnId"]}).json()
    assert rollback == {"rolledBack": True}
    assert sidecar.client.get("/stats").json()["subagents"] == 1


def test_a_child_recalls_its_parents_history_in_session_scope(sidecar: LiveSidecar) -> None:
    for turn in conversation(6, session="s-parent"):
        sidecar.post("commit-turn", commit_body(turn, session="s-parent"))
    child = "agent:main:subagent:7"
    sidecar.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": child})
    sidecar.wait_for_backlog()
    body = {
        "sessionId": "s-kid",
        "sessionKey": child,
        "messages": [],
        "prompt": QUESTION,
        "config": {"recallScope": "session"},
    }
    assert "rotates every Tuesday" in sidecar.post("assemble", body).json()["systemPromptAddition"]


def test_stats_and_healthz_report_the_store(sidecar: LiveSidecar) -> None:
    for turn in conversation(3):
        sidecar.post("commit-turn", commit_body(turn))
    sidecar.post("assemble", {"sessionId": "s-main", "sessionKey": MAIN, "messages": [], "prompt": "billing"})
    sidecar.wait_for_backlog()
    stats = sidecar.client.get("/stats").json()
    assert (stats["messages"], stats["sessions"], stats["agents"], stats["turns"]) == (6, 1, 1, 3)
    assert stats["vectors"] == 6 and stats["backlog"] == 0
    assert {"commit-turn", "assemble"} <= set(stats["latency"])
    assert stats["embedder"]["active"] == "test-hash"
    health = sidecar.client.get("/healthz", headers={"Authorization": ""}).json()
    assert health["status"] == "ok" and health["database"]["writable"]
    if on_postgres(sidecar.settings):
        assert health["database"]["backend"] == "postgresql" and health["sqliteVec"] is None
        assert health["database"]["vectorExtension"].startswith("pgvector 0.8")
    else:
        assert health["database"]["backend"] == "sqlite"
        assert health["database"]["vectorExtension"] == f"sqlite-vec {health['sqliteVec']}"
        assert health["sqliteVec"].startswith("v0.1")


@pytest.mark.sqlite_only  # PRAGMA query_only on SQLite's one write connection; PostgreSQL's writers are a pool
def test_healthz_answers_503_while_the_database_takes_no_writes(sidecar: LiveSidecar) -> None:
    """Supervisors and the plugin's start-up wait read the status code: "unavailable" must not be a 200."""
    public = {"Authorization": ""}
    with sidecar.sidecar.db.writer() as conn:  # the write connection refuses writes, as a read-only file does
        conn.execute("PRAGMA query_only = 1")
    down = sidecar.client.get("/healthz", headers=public)
    assert down.status_code == 503
    body = down.json()
    assert body["status"] == "unavailable" and not body["database"]["writable"]
    assert "readonly" in body["database"]["problem"]
    with sidecar.sidecar.db.writer() as conn:
        conn.execute("PRAGMA query_only = 0")
    assert sidecar.client.get("/healthz", headers=public).status_code == 200


def test_healthz_answers_200_when_only_degraded(tmp_path: Path) -> None:
    public = {"Authorization": ""}
    keyword_only = make_settings(tmp_path / "degraded", model_dir=tmp_path / "no-model-here")
    with live_sidecar(keyword_only, None) as degraded:
        answer = degraded.client.get("/healthz", headers=public)
        assert (answer.status_code, answer.json()["status"]) == (200, "degraded")


def test_a_changed_embedding_model_rebuilds_vectors_without_mixing(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder(dimension=64)) as server:
        for turn in conversation(5):
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
    replacement = HashEmbedder(dimension=32, model="hash-words-v2")
    with live_sidecar(settings, replacement) as server:
        server.wait_for_backlog()
        stats = server.client.get("/stats").json()
        assert stats["embedder"]["rebuilding"] and stats["embedder"]["dimension"] == 32
        assert stats["vectors"] == 10 and len(replacement.texts) == 10


def commit_past_one_megabyte(server: LiveSidecar) -> None:
    """120 turns of one ~5 KB note each ("note 0: ..." to "note 119: ..."): more than a 1 MB store holds."""
    big = "lorem ipsum dolor sit amet " * 200
    for n in range(120):
        message = {"role": "user", "content": f"note {n}: {big}", "timestamp": 1_700_000_000_000 + n}
        body = {"advancementKey": f"k{n}", "sessionId": "s", "sessionKey": MAIN, "messages": [message]}
        server.post("commit-turn", body)


def test_the_store_stays_under_max_db_size_by_archiving_not_losing(tmp_path: Path) -> None:
    import gzip
    import json

    settings: Settings = make_settings(tmp_path / "state", max_db_size_mb=1.0)
    with live_sidecar(settings, HashEmbedder()) as server:
        commit_past_one_megabyte(server)
        server.sidecar.size_cap.check(force=True)
        stats = server.client.get("/stats").json()
        assert stats["database"]["usedBytes"] <= 1024 * 1024
        archived = stats["archive"]["archivedMessages"]
        assert archived > 0 and stats["messages"] + archived == 120
        files = list(settings.archive_dir.glob("*.jsonl.gz"))
        lines = [json.loads(x) for f in files for x in gzip.decompress(f.read_bytes()).splitlines()]
        assert sorted(r["message"]["content"].split(":")[0] for r in lines) == sorted(
            f"note {n}" for n in range(archived)
        )
        assert oct(files[0].stat().st_mode & 0o777) == "0o600"


def test_an_archive_cut_short_removes_nothing_and_leaves_no_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk (or the sidecar closing) in the middle of writing an archive: the messages it was to hold
    stay in the store, and no half-written archive is left beside it."""
    from openclaw_lossless.store.statements.transfer.export import export_records as real

    settings: Settings = make_settings(tmp_path / "state", max_db_size_mb=1.0)
    archive = f"openclaw_lossless.store.{'postgres' if on_postgres(settings) else 'sqlite'}.archive.export_records"
    with live_sidecar(settings, HashEmbedder()) as server:
        commit_past_one_megabyte(server)

        def cut_short(*args: Any, **kwargs: Any) -> Any:
            for n, record in enumerate(real(*args, **kwargs)):
                if n == 5:
                    raise OSError(28, "No space left on device")
                yield record

        monkeypatch.setattr(archive, cut_short)
        with pytest.raises(OSError, match="No space"):
            server.sidecar.size_cap.check(force=True)
        assert server.client.get("/stats").json()["messages"] == 120
        assert list(settings.archive_dir.iterdir()) == []
        monkeypatch.setattr(archive, real)
        server.sidecar.size_cap._closing.set()  # as close() does: a prune it interrupts ends quietly
        monkeypatch.setattr(archive, cut_short)
        server.sidecar.size_cap.check(force=True)
        assert list(settings.archive_dir.iterdir()) == []
        assert server.client.get("/stats").json()["messages"] == 120
