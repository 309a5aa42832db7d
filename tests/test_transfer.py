"""Export and ``import --jsonl`` through the CLI: the round trip reproduces the store, imported lines are
captured (redacted, graded) like committed ones, bad lines cost only themselves, and bad scopes are refused."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.records import canonical_json
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.model.snapshots import CompactionRecord
from tests.conversation import conversation
from tests.helpers import make_settings, on_postgres, per_test_on_postgres, run_cli, run_cli_json, store_rows

MAIN, CHILD, OPS = "agent:main:main", "agent:main:subagent:7", "agent:ops:main"
OPENAI_KEY = "sk-proj-" + "Q7w9E2r4T6y8U0i1O3p5A7s9D1f3G5h7J9k"
GITHUB_TOKEN = "ghp_" + "R8x2Lq9Zt4Vb7Nc1Md5Kp3Wf6Hj0Gs2Ya8Ue"
TOOL_ARGUMENT = "hunter2sekrit"  # sent as a tool call's "password"
SECRETS = (OPENAI_KEY, GITHUB_TOKEN, TOOL_ARGUMENT, OPENAI_KEY[8:], GITHUB_TOKEN[4:])  # the tails FTS would index

# Each table as a person would compare two stores: by the names the rows carry, not internal row ids
# (message, compaction, snapshot and link ids are names too: citations, --before-compaction N, spawn ids).
TABLES = {
    "sessions": "SELECT session_id, session_key, agent_id, created_at, last_seen_at FROM sessions ORDER BY session_id",
    "turns": "SELECT t.advancement_key, s.session_id, t.committed_at, t.message_count, t.heartbeat FROM turns t"
    " JOIN sessions s ON s.id = t.session_rowid ORDER BY t.advancement_key",
    "messages": "SELECT m.id, s.session_id, m.agent_id, t.advancement_key, m.role, m.kind, m.created_at, m.stored_at,"
    " m.text, m.original, m.content_hash, m.window_key, m.tokens, m.importance, m.importance_label, m.cites"
    " FROM messages m JOIN sessions s ON s.id = m.session_rowid LEFT JOIN turns t ON t.id = m.turn_rowid ORDER BY m.id",
    "compactions": "SELECT c.id, s.session_id, c.recorded_at, c.tokens_before, c.tokens_after, c.compacted, c.summary,"
    " c.reason, c.last_message_id FROM compactions c JOIN sessions s ON s.id = c.session_rowid ORDER BY c.id",
    "snapshots": "SELECT sn.id, sn.name, s.session_id, sn.last_message_id, sn.created_at, sn.automatic,"
    " sn.compaction_id FROM snapshots sn JOIN sessions s ON s.id = sn.session_rowid ORDER BY sn.id",
    "subagent_links": "SELECT * FROM subagent_links ORDER BY id",
    "fts": "SELECT rowid FROM messages_fts WHERE messages_fts MATCH 'audit OR staging OR deploy OR REDACTED'"
    " ORDER BY rowid",
}
# The keyword index's rows on PostgreSQL: the messages whose stored lexemes match the same words.
POSTGRES_FTS = (
    "SELECT id FROM messages WHERE search @@ to_tsquery('lossless', 'audit | staging | deploy | redacted') ORDER BY id"
)


def keyword_matches(state: Path, phrase: str) -> int:
    """How many messages of the store in ``state`` its keyword index finds for ``phrase``, either backend."""
    settings = make_settings(state)
    if on_postgres(settings):
        sql = "SELECT count(*) FROM messages WHERE search @@ phraseto_tsquery('lossless', ?)"
        return int(store_rows(settings, sql, (phrase,))[0][0])
    sql = "SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?"
    return int(store_rows(settings, sql, (f'"{phrase}"',))[0][0])


@pytest.fixture(autouse=True)
def keyword_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's queries open the store in-process: no model is loaded for them here."""
    monkeypatch.setenv("LOSSLESS_EMBEDDING_PROVIDER", "none")


def _commit(sidecar: Sidecar, key: str, session: str, session_key: str, messages: list[dict[str, Any]]) -> None:
    sidecar.ingest.commit_turn(key, session, session_key, messages, heartbeat=False, recall=sidecar.settings.recall)


@pytest.fixture(scope=per_test_on_postgres)
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with everything an export carries, written through the sidecar's hook methods.

    Two agents; a pasted key; a replayed turn (counts a message it did not store) and a heartbeat turn (no
    messages); a compaction with its automatic snapshot and a manual one; a finished subagent whose outcome
    reached the parent, and a running one.
    """
    state = tmp_path_factory.mktemp("transfer") / "state"
    sidecar = Sidecar(make_settings(state, embedding_provider="none"), start_worker=False)
    try:
        early = conversation(5)
        for turn in early:
            _commit(sidecar, turn.key, "s-main", MAIN, turn.messages)
        _commit(sidecar, "s-main:key", "s-main", MAIN, [{"role": "user", "content": f"deploy key {OPENAI_KEY}"}])
        _commit(sidecar, "s-main:replay", "s-main", MAIN, early[0].messages[:1])
        sidecar.ingest.commit_turn(
            "s-main:beat", "s-main", MAIN, [{"role": "user", "content": "ping"}], heartbeat=True,
            recall=sidecar.settings.recall,
        )  # fmt: skip
        sidecar.ingest.compact(
            "s-main", MAIN, CompactionRecord(5000, 1200, True, "the first turns, summarised", "size")
        )
        for turn in conversation(3, session="s-main-late", seed=5):
            _commit(sidecar, turn.key, "s-main", MAIN, turn.messages)
        sidecar.ingest.snapshot_create("before-refactor", "s-main")
        sidecar.ingest.subagent_spawn(MAIN, CHILD, "isolated")
        answer = "Remember that the audit bucket is in eu-north-1."
        child: list[dict[str, Any]] = [
            {"role": "user", "content": "Find the region of the audit bucket."},
            {"role": "assistant", "content": [{"type": "text", "text": answer}]},
        ]
        _commit(sidecar, "child:1", "s-child", CHILD, child)
        assert sidecar.ingest.subagent_ended(CHILD, "completed").outcomes_copied == 1
        sidecar.ingest.subagent_spawn(MAIN, "agent:main:subagent:8", None)
        for turn in conversation(2, session="s-ops", seed=9):
            _commit(sidecar, turn.key, "s-ops", OPS, turn.messages)
    finally:
        sidecar.close()
    return state


def error_line(err: str) -> str:
    """The one error line a failed command prints (and never a traceback)."""
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("openclaw-lossless:")]
    assert len(lines) == 1, err
    return lines[0]


def content(state: Path) -> dict[str, list[tuple[Any, ...]]]:
    settings = make_settings(state)
    tables = TABLES | {"fts": POSTGRES_FTS} if on_postgres(settings) else TABLES
    return {table: store_rows(settings, sql) for table, sql in tables.items()}


def export(capsys: pytest.CaptureFixture[str], state: Path, path: Path, *scope: str) -> list[dict[str, Any]]:
    code, _, err = run_cli(capsys, state, "export", "-o", str(path), *scope)
    assert code == 0, err
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_export_then_import_reproduces_the_store_exactly(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    first = tmp_path / "first.jsonl"
    lines = export(capsys, source, first)
    assert oct(first.stat().st_mode & 0o777) == "0o600"
    expected = content(source)
    types = [line.get("type", "message") for line in lines]
    assert types == sorted(types, key=["message", "session", "turn", "compaction", "snapshot", "subagentLink"].index)
    # sessions: s-main, s-child, s-ops, and the one registered for the subagent still running
    assert {t: types.count(t) for t in ("session", "compaction", "snapshot", "subagentLink")} == {
        "session": 4, "compaction": 1, "snapshot": 2, "subagentLink": 2,
    }  # fmt: skip
    copy = tmp_path / "copy"
    imported = run_cli_json(capsys, copy, "import", "--jsonl", str(first))
    assert (imported["read"], imported["malformed"], imported["conflicts"]) == (len(lines), 0, 0)
    assert imported["imported"] == types.count("message") == len(expected["messages"])
    assert (imported["sessions"], imported["turns"], imported["compactions"]) == (4, len(expected["turns"]), 1)
    assert (imported["snapshots"], imported["subagent_links"]) == (2, 2)
    assert content(copy) == expected

    again = run_cli_json(capsys, copy, "import", "--jsonl", str(first))
    assert again["already_present"] == len(lines)
    assert not any(again[k] for k in ("imported", "sessions", "turns", "compactions", "snapshots", "subagent_links"))
    assert content(copy) == expected
    second = tmp_path / "second.jsonl"
    export(capsys, copy, second)
    assert second.read_bytes() == first.read_bytes()
    # its own export, back into the store it came from
    assert run_cli_json(capsys, source, "import", "--jsonl", str(first))["already_present"] == len(lines)
    assert content(source) == expected

    for command in (
        ("recover", "--before-compaction", "1", "--last", "100"),
        ("recover", "--snapshot", "before-refactor", "--last", "100"),
        ("snapshot", "show", "pre-compaction-1"),
        ("snapshot", "list"),
        ("search", "audit bucket region", "--mode", "keyword", "--session", "s-main"),
    ):
        assert run_cli_json(capsys, copy, *command) == run_cli_json(capsys, source, *command), command
    before = run_cli_json(capsys, copy, "recover", "--before-compaction", "1", "--last", "100")["messages"]
    assert before[-1]["text"] == "deploy key [REDACTED:openai_key]"


def test_import_into_a_store_with_its_own_history_moves_ids_and_keeps_every_pointer(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    """Message 1, compaction 1 and the name pre-compaction-1 are taken: what points at them follows them."""
    target = tmp_path / "target"
    sidecar = Sidecar(make_settings(target, embedding_provider="none"), start_worker=False)
    try:
        for turn in conversation(2, session="s-other", seed=11):
            _commit(sidecar, turn.key, "s-other", "agent:main:other", turn.messages)
        sidecar.ingest.compact("s-other", "agent:main:other", CompactionRecord(900, 100, True, "other", None))
    finally:
        sidecar.close()
    exported = tmp_path / "all.jsonl"
    export(capsys, source, exported)
    report = run_cli_json(capsys, target, "import", "--jsonl", str(exported))
    assert (report["malformed"], report["conflicts"], report["compactions"], report["snapshots"]) == (0, 0, 1, 2)

    names = [s["name"] for s in run_cli_json(capsys, target, "snapshot", "list")["snapshots"]]
    assert names == ["pre-compaction-1", "pre-compaction-2", "before-refactor"]
    assert texts(run_cli_json(capsys, target, "snapshot", "show", "pre-compaction-2", "--last", "100")) == texts(
        run_cli_json(capsys, source, "snapshot", "show", "pre-compaction-1", "--last", "100")
    )
    assert texts(run_cli_json(capsys, target, "recover", "--before-compaction", "2", "--last", "100")) == texts(
        run_cli_json(capsys, source, "recover", "--before-compaction", "1", "--last", "100")
    )
    outcome = [
        m for m in run_cli_json(capsys, target, "recover", "--session", "s-main")["messages"] if m["kind"] == "outcome"
    ]
    cited = run_cli_json(capsys, target, "recover", "--session", "s-child")["messages"][-1]
    assert outcome[0]["cites"] == cited["citation"] and outcome[0]["text"].endswith(cited["text"])
    again = run_cli_json(capsys, target, "import", "--jsonl", str(exported))
    assert again["already_present"] == report["read"] and again["imported"] == again["snapshots"] == 0


def test_a_pruned_archive_imported_back_restores_the_store(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    """Archives hold message lines only; the turns they name stay in the store and keep their counts."""
    copy = tmp_path / "copy"
    run_cli_json(capsys, copy, "import", "--jsonl", str(export_path(capsys, source, tmp_path)))
    assert run_cli_json(capsys, copy, "prune", "--max-db-size-mb", "0.001")["pruned"] > 0
    assert content(copy)["messages"] != content(source)["messages"]
    for archive in sorted((copy / "archive").glob("*.jsonl.gz")):
        assert run_cli_json(capsys, copy, "import", "--jsonl", str(archive))["malformed"] == 0
    assert content(copy) == content(source)


def export_path(capsys: pytest.CaptureFixture[str], state: Path, tmp_path: Path) -> Path:
    path = tmp_path / "export.jsonl"
    export(capsys, state, path)
    return path


def texts(data: dict[str, Any]) -> list[str]:
    return [message["text"] for message in data["messages"]]


def _planted(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Lines as a tampered or foreign export might carry them: secrets in the text, the original and an outcome."""
    plain = template | {
        "id": 9001,
        "text": f"nothing to see {OPENAI_KEY}",
        "importance": 0.0,
        "importanceLabel": "ignore",
        "message": {"role": "user", "content": f"Remember that the deploy key is {OPENAI_KEY}, and {GITHUB_TOKEN}"},
    }
    tool = template | {
        "id": 9002,
        "role": "assistant",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "text", "text": f"logging in with {GITHUB_TOKEN}"},
                {"type": "toolCall", "name": "login", "arguments": {"user": "ops", "password": TOOL_ARGUMENT}},
            ],
        },
    }
    outcome = template | {
        "id": 9003,
        "kind": "outcome",
        "role": "assistant",
        "cites": 1,
        "text": f"[subagent result] the key is {OPENAI_KEY}",
        "message": {"kind": "subagentOutcome", "childSessionKey": CHILD, "cites": "msg:1", "note": GITHUB_TOKEN},
    }
    for line in (plain, tool):  # as an export writes it: the hash of the original
        line["contentHash"] = hashlib.sha256(canonical_json(line["message"]).encode()).hexdigest()
    return [plain, tool, outcome]


@pytest.mark.parametrize("redact_originals", [True, False])
def test_imported_secrets_are_redacted_as_if_committed(
    capsys: pytest.CaptureFixture[str],
    source: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    redact_originals: bool,
) -> None:
    template = export(capsys, source, tmp_path / "one.jsonl", "--session", "s-ops")[0]
    planted = tmp_path / "planted.jsonl"
    planted.write_text("".join(json.dumps(line) + "\n" for line in _planted(template)))
    monkeypatch.setenv("LOSSLESS_REDACT_ORIGINALS", str(redact_originals).lower())
    store = tmp_path / "store"
    assert run_cli_json(capsys, store, "import", "--jsonl", str(planted))["imported"] == 3

    settings = make_settings(store)
    rows = store_rows(settings, "SELECT id, text, original, importance_label FROM messages ORDER BY id")
    hashes = store_rows(settings, "SELECT original, content_hash FROM messages WHERE kind = 'message'")
    assert [keyword_matches(store, secret) for secret in SECRETS] == [0] * len(SECRETS)
    assert rows[0][1] == "Remember that the deploy key is [REDACTED:openai_key], and [REDACTED:github_token]"
    assert rows[0][3] == "must_remember"  # graded from the captured text, not the line's "ignore"
    assert all(bytes(digest) == hashlib.sha256(original.encode()).digest() for original, digest in hashes)
    assert all(secret not in text for _, text, _, _ in rows for secret in SECRETS)
    hits = run_cli_json(capsys, store, "search", "deploy key logging login", "--mode", "keyword")["hits"]
    assert len(hits) >= 2 and not any(secret in json.dumps(hits) for secret in SECRETS)
    if redact_originals:
        assert not any(secret in str(row) for row in rows for secret in SECRETS)
        if not on_postgres(settings):  # nor any page of the SQLite files
            raw = b"".join(path.read_bytes() for path in store.glob("lossless.sqlite*"))
            assert not any(secret.encode() in raw for secret in SECRETS)
    else:  # kept in the stored original only, as a commit over HTTP keeps it under this setting
        assert OPENAI_KEY in rows[0][2] and TOOL_ARGUMENT in rows[1][2]


def test_imported_summaries_and_reasons_are_redacted_as_the_hooks_redact_them(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    lines = export(capsys, source, tmp_path / "all.jsonl")
    compaction = next(line for line in lines if line.get("type") == "compaction")
    link = next(line for line in lines if line.get("type") == "subagentLink")
    planted = [
        compaction | {"summary": f"## Done\nrotated {OPENAI_KEY}", "reason": f"overflow, {GITHUB_TOKEN}"},
        link | {"endedReason": f"failed with {GITHUB_TOKEN}"},
    ]
    path = tmp_path / "planted.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in planted))
    store = tmp_path / "store"
    run_cli_json(capsys, store, "import", "--jsonl", str(path))

    [(summary, reason)] = store_rows(make_settings(store), "SELECT summary, reason FROM compactions")
    [(ended,)] = store_rows(make_settings(store), "SELECT ended_reason FROM subagent_links")
    assert (summary, reason) == ("## Done\nrotated [REDACTED:openai_key]", "overflow, [REDACTED:github_token]")
    assert ended == "failed with [REDACTED:github_token]"


def _bad_lines(template: dict[str, Any]) -> list[bytes]:
    def line(**changes: Any) -> bytes:
        return json.dumps(template | changes).encode()

    without_message = {k: v for k, v in template.items() if k != "message"}
    return [
        line(contentHash="zz" * 32),
        line(tokens="12"),
        line(id=10**30),
        line(sessionId=""),
        line(sessionId="\ud800"),
        line(sessionKey="not-a-session-key"),
        line(createdAt=10**400),
        line(kind="weird"),
        line(message={"role": "", "content": "no role"}),
        line(message=["not", "an", "object"]),
        line(message={"role": "user", "content": "x"}, windowKey="short"),
        json.dumps(without_message).encode(),
        line(createdAt=0).replace(b'"createdAt": 0', b'"createdAt": NaN'),
        b'{"id": 1, "text": "\xff\xfe not utf-8"}',
        b"[" * 100_000,
        b"{broken",
        b"[1, 2]",
        json.dumps({"type": "mystery"}).encode(),
        json.dumps({"type": "snapshot", "id": 5, "name": "../../etc/passwd", "sessionId": "s-ops",
                    "lastMessageId": 1, "createdAt": 1.0, "automatic": False, "compactionId": None}).encode(),
        json.dumps({"type": "compaction", "id": "one", "sessionId": "s-ops", "recordedAt": 1.0,
                    "compacted": True}).encode(),
        json.dumps({"type": "turn", "advancementKey": "k", "sessionId": "s-ops", "committedAt": 1.0,
                    "messageCount": -1, "heartbeat": False}).encode(),
    ]  # fmt: skip


def test_each_bad_line_is_counted_and_skipped_and_the_rest_imported(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    good = export(capsys, source, tmp_path / "ops.jsonl", "--session", "s-ops")
    bad = _bad_lines(good[0])
    mixed = tmp_path / "mixed.jsonl"
    body = [json.dumps(line).encode() for line in good]
    mixed.write_bytes(b"\n".join(body[:2] + bad[:10] + body[2:4] + bad[10:] + [b""] + body[4:]) + b"\n")

    code, out, err = run_cli(capsys, tmp_path / "store", "import", "--jsonl", str(mixed))
    assert code == 0 and "Traceback" not in err
    assert f"malformed: {len(bad)}" in out
    data = run_cli_json(capsys, tmp_path / "again", "import", "--jsonl", str(mixed))
    messages = sum("type" not in line for line in good)
    assert (data["read"], data["malformed"], data["imported"]) == (len(good) + len(bad), len(bad), messages)
    assert (data["sessions"], data["turns"], data["compactions"]) == (1, 2, 0)
    assert content(tmp_path / "again")["messages"] == [row for row in content(source)["messages"] if row[1] == "s-ops"]


def test_a_file_that_cannot_be_read_is_one_error_line_and_exit_2(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    export(capsys, source, tmp_path / "all.jsonl")
    not_gzip = tmp_path / "plain.jsonl.gz"
    not_gzip.write_text("this is not gzip\n")
    truncated = tmp_path / "cut.jsonl.gz"
    truncated.write_bytes(gzip.compress((tmp_path / "all.jsonl").read_bytes())[:-400])
    for path, says in (
        (tmp_path / "missing.jsonl", "no such file"),
        (tmp_path, "no such file"),
        (not_gzip, "cannot read"),
        (truncated, "lines before it were imported"),
    ):
        code, _, err = run_cli(capsys, tmp_path / "store", "import", "--jsonl", str(path))
        assert code == 2 and says in error_line(err), err
    assert run_cli_json(capsys, tmp_path / "store", "stats")["messages"] > 0
    if os.geteuid() != 0:  # root reads a 000 file anyway
        locked = tmp_path / "locked.jsonl"
        locked.write_text("{}\n")
        locked.chmod(0)
        code, _, err = run_cli(capsys, tmp_path / "store", "import", "--jsonl", str(locked))
        assert code == 2 and "cannot read" in error_line(err)


@pytest.mark.parametrize(
    "scope", [("--session", "nosuch"), ("--agent", "nosuch"), ("--session", "s-ops", "--agent", "main")]
)
def test_exporting_an_unknown_session_or_agent_is_an_error(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path, scope: tuple[str, ...]
) -> None:
    target = tmp_path / "out.jsonl"
    code, _, err = run_cli(capsys, source, "export", "-o", str(target), *scope)
    assert code == 2 and "nothing to export" in error_line(err)
    assert not target.exists()


def test_a_scoped_export_carries_its_sessions_records_only(
    capsys: pytest.CaptureFixture[str], source: Path, tmp_path: Path
) -> None:
    ops = export(capsys, source, tmp_path / "ops.jsonl", "--agent", "ops")
    assert {line["sessionId"] for line in ops if "sessionId" in line} == {"s-ops"}
    assert not any(line.get("type") in ("compaction", "snapshot", "subagentLink") for line in ops)
    main_session = export(capsys, source, tmp_path / "main.jsonl", "--session", "s-main")
    assert {line["type"] for line in main_session if "type" in line} == {
        "session", "turn", "compaction", "snapshot", "subagentLink",
    }  # fmt: skip
    copy = tmp_path / "copy"
    run_cli_json(capsys, copy, "import", "--jsonl", str(tmp_path / "main.jsonl"))
    shown = run_cli_json(capsys, copy, "snapshot", "show", "before-refactor", "--last", "100")
    assert shown == run_cli_json(capsys, source, "snapshot", "show", "before-refactor", "--last", "100")
