"""The operator's CLI against a real database: every command, human and --json output, and clean errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.store.sqlite.connection import open_connection
from tests.conversation import commit_body, conversation
from tests.helpers import (
    HashEmbedder,
    live_sidecar,
    make_settings,
    on_postgres,
    per_test_on_postgres,
    run_cli,
    run_cli_json,
)
from tests.openclaw_state import use_linked_openclaw

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test


@pytest.fixture(scope=per_test_on_postgres)
def state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two sessions, a compaction and its snapshot, written through the real hooks."""
    state_dir = tmp_path_factory.mktemp("cli") / "state"
    with live_sidecar(make_settings(state_dir), HashEmbedder()) as server:
        for turn in conversation(12):
            server.post("commit-turn", commit_body(turn))
        server.post("compact", {"sessionId": "s-main", "sessionKey": "agent:main:main", "tokensBefore": 5000})
        for turn in conversation(3, session="s-two", seed=3):
            server.post("commit-turn", commit_body(turn, session="s-two"))
        server.wait_for_backlog()
    return state_dir


def test_search_finds_the_fact_with_citations(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    data = run_cli_json(capsys, state, "search", "staging database password", "-k", "3", "--mode", "keyword")
    assert "rotates every Tuesday" in data["hits"][0]["text"]
    assert data["hits"][0]["citation"].startswith("msg:")
    code, out, _ = run_cli(capsys, state, "search", "staging database password", "--role", "assistant")
    assert code == 0 and "user" not in out.split("\n")[0]
    only_user = run_cli_json(capsys, state, "search", "staging password", "--role", "user")
    assert only_user["hits"] and {h["role"] for h in only_user["hits"]} == {"user"}
    assert run_cli_json(capsys, state, "search", "staging password", "--until", "2001-01-01")["hits"] == []


def test_recover_prints_the_conversation_as_it_was(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    data = run_cli_json(capsys, state, "recover", "--last", "4", "--session", "s-main")
    assert len(data["messages"]) == 4 and data["messages"][-1]["original"]["role"] == "assistant"
    before = run_cli_json(capsys, state, "recover", "--before-compaction", "1", "--last", "100")
    assert len(before["messages"]) == 24
    code, out, _ = run_cli(capsys, state, "recover", "--snapshot", "pre-compaction-1", "--last", "2")
    assert code == 0 and out.startswith("# Conversation s-main") and "**assistant**" in out


def test_a_failed_compaction_has_no_before_and_its_status_travels_in_the_export(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    state = tmp_path / "state"
    with live_sidecar(make_settings(state), HashEmbedder()) as server:
        server.post("commit-turn", commit_body(conversation(1)[0]))
        body = {"sessionId": "s-main", "sessionKey": "agent:main:main", "compacted": False, "ok": False}
        failed = server.post("compact", body | {"reason": "provider error 529"}).json()["compactionId"]
    code, _, err = run_cli(capsys, state, "recover", "--before-compaction", str(failed))
    assert code == 2 and "did not compact: failed (provider error 529)" in err and "recover --session s-main" in err
    assert "Traceback" not in err
    exported = tmp_path / "all.jsonl"
    assert run_cli(capsys, state, "export", "-o", str(exported))[0] == 0
    lines = [json.loads(line) for line in exported.read_text().splitlines()]
    compactions = [line for line in lines if line.get("type") == "compaction"]
    assert [(c["status"], c["compacted"], c["reason"]) for c in compactions] == [
        ("failed", False, "provider error 529")
    ]
    assert [line for line in lines if line.get("type") == "snapshot"] == []


def test_snapshots_are_created_listed_shown_and_never_overwritten(
    capsys: pytest.CaptureFixture[str], state: Path
) -> None:
    created = run_cli_json(capsys, state, "snapshot", "create", "before-refactor", "--session", "s-two")
    assert created["lastMessageId"] is not None
    names = [s["name"] for s in run_cli_json(capsys, state, "snapshot", "list")["snapshots"]]
    assert names == ["pre-compaction-1", "before-refactor"]
    shown = run_cli_json(capsys, state, "snapshot", "show", "before-refactor")
    assert len(shown["messages"]) == 6 and shown["agentId"] == "main"
    code, out, _ = run_cli(capsys, state, "snapshot", "show", "pre-compaction-1", "--last", "2")
    assert code == 0 and out.startswith("# Snapshot pre-compaction-1 of conversation s-main (agent main)\n")
    code, _, err = run_cli(capsys, state, "snapshot", "create", "before-refactor")
    assert code == 2 and "already exists" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, state, "snapshot", "create", "../../etc/passwd")
    assert code == 2 and "snapshot name" in err


def test_pack_is_bounded_and_cited_with_a_trace(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    data = run_cli_json(
        capsys, state, "pack", "--query", "staging database password", "--budget-tokens", "300", "--trace"
    )
    assert data["items"] and all(item["citation"].startswith("msg:") for item in data["items"])
    assert data["estimatedTokens"] <= 300
    assert any("rotates every Tuesday" in item["text"] for item in data["items"])
    candidates = data["trace"]["candidates"]
    assert {"lanes", "similarity", "recency", "decision"} <= set(candidates[0])
    assert {c["decision"] for c in candidates} >= {"kept"}


def test_stats_and_doctor(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    stats = run_cli_json(capsys, state, "stats")
    assert stats["messages"] == 30 and stats["compactions"] == 1
    code, out, _ = run_cli(capsys, state, "doctor", "--json")
    report = json.loads(out)
    checks = {f["check"]: f for f in report["findings"]}
    assert {"binding", "integrity", "fts", "vectors", "permissions", "disk", "backlog"} <= set(checks)
    assert checks["integrity"]["ok"] and checks["fts"]["ok"] and checks["permissions"]["ok"]
    os.chmod(state, 0o755)
    try:
        code, out, _ = run_cli(capsys, state, "doctor")
        assert code == 1 and "chmod -R u=rwX,go=" in out
    finally:
        os.chmod(state, 0o700)


def test_doctor_takes_provider_none_as_a_choice_and_a_missing_api_key_as_a_problem(
    capsys: pytest.CaptureFixture[str], state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    use_linked_openclaw(monkeypatch, tmp_path / "home", state)
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    code, out, _ = run_cli(capsys, state, "doctor", "--json")
    embedder = {f["check"]: f for f in json.loads(out)["findings"]}["embedder"]
    assert embedder["ok"] and "'none' chosen" in embedder["detail"] and embedder["fix"] is None
    assert code == 0, out
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "openai-compatible")
    for name in ("OPENAI_API_KEY", "LOSSLESS_OPENAI_API_KEY", "EMBEDDING_BASE_URL", "LOSSLESS_EMBEDDING_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    code, out, _ = run_cli(capsys, state, "doctor")
    assert code == 1 and "BAD  embedder: openai-compatible at https://api.openai.com/v1 but no OPENAI_API_KEY" in out
    assert "fix: set OPENAI_API_KEY" in out
    monkeypatch.setenv("EMBEDDING_BASE_URL", "http://127.0.0.1:11434/v1")  # a local server needs no key
    _, out, _ = run_cli(capsys, state, "doctor", "--json")
    assert {f["check"]: f for f in json.loads(out)["findings"]}["embedder"]["ok"]


def test_doctor_notes_a_large_backlog_and_what_drains_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    use_linked_openclaw(monkeypatch, tmp_path / "home", state_dir)
    with live_sidecar(make_settings(state_dir, embedding_provider="none"), None) as server:
        many = [{"role": "user", "content": f"note number {n}", "timestamp": n} for n in range(1, 1202)]
        server.sidecar.ingest.ingest("s-bulk", "agent:main:main", many, heartbeat=False, recall=server.settings.recall)
    code, out, _ = run_cli(capsys, state_dir, "doctor")
    assert "note backlog: 1201 messages waiting to be embedded" in out
    assert "fix: openclaw-lossless serve" in out and "reindex --vectors --missing" in out
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")
    code, out, _ = run_cli(capsys, state_dir, "doctor", "--json")
    backlog = {f["check"]: f for f in json.loads(out)["findings"]}["backlog"]
    assert backlog["ok"] and "provider 'none' embeds nothing" in backlog["detail"]
    assert code == 0, "a note is not a failure"


def test_reindex_rebuilds_fts_and_vectors(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    state_dir = tmp_path / "state"
    settings = make_settings(state_dir, embedding_provider="none")
    with live_sidecar(settings, None) as server:
        for turn in conversation(3):
            server.post("commit-turn", commit_body(turn))
    query = ("nightly build matrix", "--mode", "keyword")
    fts5 = not on_postgres(settings)  # a lost FTS5 index; PostgreSQL's lexemes are a column of each row
    if fts5:
        conn = open_connection(state_dir / "lossless.sqlite")
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')")
        conn.close()
        assert run_cli_json(capsys, state_dir, "search", *query)["hits"] == []
    monkeypatch.setattr("openclaw_lossless.reindex.FTS_BATCH", 4)  # 6 messages: rebuilt in two batches
    data = run_cli_json(capsys, state_dir, "reindex", "--fts")
    assert data["fts"] == 6
    found = [hit["text"] for hit in run_cli_json(capsys, state_dir, "search", *query)["hits"]]
    assert any("nightly build matrix" in text for text in found) and len(found) == 2
    if fts5:
        conn = open_connection(state_dir / "lossless.sqlite")
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")  # raises if not
        conn.close()
    data = run_cli_json(capsys, state_dir, "reindex", "--vectors", "--missing")
    assert data["vectors"]["embedded"] == 6
    _, out, _ = run_cli(capsys, state_dir, "doctor", "--json")
    assert {f["check"]: f["ok"] for f in json.loads(out)["findings"]}["vectors"]


def test_prune_dry_run_changes_nothing(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    data = run_cli_json(capsys, state, "prune", "--dry-run", "--max-db-size-mb", "0.1")
    assert data["dryRun"] and data["pruned"] > 0
    assert run_cli_json(capsys, state, "stats")["messages"] == 30


def test_bad_input_is_one_line_and_no_traceback(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    code, _, err = run_cli(capsys, state, "recover", "--session", "no-such-session")
    assert code == 2 and err == "openclaw-lossless: no session 'no-such-session' is stored\n"
    code, _, err = run_cli(capsys, state, "recover", "--snapshot", "no-such-snapshot")
    assert code == 2 and err.startswith("openclaw-lossless: no snapshot") and err.count("\n") == 1
    code, _, err = run_cli(capsys, state, "import", "--jsonl", "/nonexistent/file.jsonl")
    assert code == 2 and "no such file" in err


def test_usage_errors_are_one_line_with_a_pointer_to_help(capsys: pytest.CaptureFixture[str], state: Path) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["search", "--state-dir", str(state)])
    _, err = capsys.readouterr()
    assert exited.value.code == 2
    assert err == (
        "openclaw-lossless search: error: the following arguments are required: query"
        " (see 'openclaw-lossless search --help')\n"
    )


def openclaw_state(root: Path) -> Path:
    """An OpenClaw state dir with one damaged agent database and one readable legacy transcript."""
    broken = root / "agents" / "broken" / "agent" / "openclaw-agent.sqlite"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"this is not a database" * 100)
    transcript = root / "agents" / "main" / "sessions" / "s-legacy.jsonl"
    transcript.parent.mkdir(parents=True)
    entries = [
        {"type": "session", "version": 4, "id": "s-legacy"},
        {
            "type": "message",
            "id": "a",
            "message": {"role": "user", "content": "Where is the spare key?", "timestamp": 1},
        },
        {"type": "message", "id": "b", "message": {"role": "assistant", "content": "Under the mat.", "timestamp": 2}},
    ]
    transcript.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return root


def test_import_names_each_unreadable_source_with_its_reason_and_exits_1(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = openclaw_state(tmp_path / "openclaw")
    code, out, err = run_cli(capsys, tmp_path / "store", "import", "--openclaw-state", str(source))
    assert code == 1
    [reason] = err.splitlines()
    assert reason.startswith("openclaw-lossless: cannot read agents/broken/agent/openclaw-agent.sqlite: ")
    assert "not a database" in reason
    assert "messages imported: 2" in out and "errors: 1" in out, "the readable source is imported all the same"
    code, _, err = run_cli(capsys, tmp_path / "store", "import", "--openclaw-state", str(tmp_path / "nowhere"))
    assert code == 2 and "no OpenClaw state dir" in err


def test_the_module_entry_point_and_help_work() -> None:
    result = subprocess.run([sys.executable, "-m", "openclaw_lossless", "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    for command in ("serve", "search", "recover", "snapshot", "import", "export", "pack", "stats", "doctor"):
        assert command in result.stdout
    refused = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--host", "0.0.0.0", "--state-dir", "/tmp/x"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert refused.returncode == 2 and "not loopback" in refused.stderr
