"""``openclaw-lossless migrate-store`` from the command line: a SQLite store written by a real sidecar over HTTP
is copied into PostgreSQL, where a sidecar answers for the old messages (re-embedded there) and a forgotten
message stays forgotten; a copy interrupted part way is finished by running it again; PostgreSQL copied back
into a SQLite file exports the same bytes; and every target that must be refused is refused with a message and
nothing written."""

from __future__ import annotations

import json
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store import copy
from openclaw_lossless.store.postgres import transfer as pg_transfer
from openclaw_lossless.store.postgres.messages import ID_ORDER_LOCK
from openclaw_lossless.store.postgres.migrations import applied_names
from tests.conversation import FACT, QUESTION, commit_body, conversation
from tests.helpers import NOBODY_PORT, HashEmbedder, live_sidecar, make_settings
from tests.postgres.conftest import Database

MAIN, CHILD = "agent:main:main", "agent:main:subagent:1"
FORGOTTEN_WORD = "PELICAN"  # in the one message forgotten
PASSWORD = "Sup3rSecretPassw0rd"  # noqa: S105 - a URL's password that must never be printed


@pytest.fixture(autouse=True)
def sqlite_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each command names its stores with flags: the PostgreSQL pass's environment must not choose for it."""
    monkeypatch.delenv("LOSSLESS_DATABASE_URL", raising=False)
    monkeypatch.delenv("LOSSLESS_DATABASE_SCHEMA", raising=False)


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A SQLite store written by a live sidecar over HTTP (turns, a compaction and its snapshot, a subagent, a
    forgotten message), and an export taken before the forget, which still holds that message."""
    state = tmp_path_factory.mktemp("migrate") / "state"
    before_forget = state.parent / "before-forget.jsonl"
    with pytest.MonkeyPatch.context() as env:
        env.delenv("LOSSLESS_DATABASE_URL", raising=False)
        env.delenv("LOSSLESS_DATABASE_SCHEMA", raising=False)
        with live_sidecar(make_settings(state), HashEmbedder()) as server:
            write_history(server)
            assert main(["export", "-o", str(before_forget), "--state-dir", str(state), "--port", "9"]) == 0
            hit = server.client.get("/v1/search", params={"q": FORGOTTEN_WORD, "mode": "keyword"}).json()["hits"][0]
            assert FORGOTTEN_WORD in hit["text"]
            gone = server.client.post("/v1/forget", json={"ids": [hit["citation"]]}).json()
            assert gone["forgotten"] == 1
            server.wait_for_backlog()
    return state, before_forget


def write_history(server: Any) -> None:
    def commit(body: dict[str, Any]) -> None:
        assert server.post("commit-turn", body).json()["status"] == "committed"

    turns = conversation(8)
    for turn in turns[:6]:
        commit(commit_body(turn))
    commit({"advancementKey": "codeword", "sessionId": "s-main", "sessionKey": MAIN,
            "messages": [{"role": "user", "content": f"The launch codeword is {FORGOTTEN_WORD} seven."}]})  # fmt: skip
    compact = {"sessionId": "s-main", "sessionKey": MAIN, "tokensBefore": 9000, "tokensAfter": 1200, "ok": True}
    assert server.post("compact", compact | {"summary": "Staging rotates on Tuesdays."}).json()["recorded"]
    assert server.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": CHILD}).status_code == 200
    for turn in conversation(2, session="s-child", seed=3):
        commit(commit_body(turn, session="s-child", key=CHILD))
    assert server.post("subagent-ended", {"childSessionKey": CHILD, "reason": "completed"}).status_code == 200
    for turn in turns[6:]:
        commit(commit_body(turn))


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real CLI entry, with no sidecar on its port unless the test names one: exit code, stdout, stderr."""
    port = [] if "--port" in args else ["--port", str(NOBODY_PORT)]
    code = main([*args, *port])
    out, err = capsys.readouterr()
    return code, out, err


def migrate(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = cli(capsys, "migrate-store", *args, "--json")
    assert code == 0, err
    summary: dict[str, Any] = json.loads(out)
    return summary


def export(capsys: pytest.CaptureFixture[str], *store: str) -> str:
    code, out, err = cli(capsys, "export", *store)
    assert code == 0, err
    return out


def messages_in(url: str, schema: str = "lossless") -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f'SELECT count(*) FROM "{schema}".messages').fetchone()
    assert row is not None
    return int(row[0])


def test_a_sqlite_store_moved_to_postgresql_is_served_there_and_the_forgotten_stays_forgotten(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state, before_forget = source
    summary = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    assert summary["verified"] and summary["resumedAfter"] == 0
    assert summary["rows"]["messages"] == summary["copied"]["messages"] == 21  # 8 + 2 turns of two, one forgotten
    rows = summary["rows"]
    assert (rows["forgotten"], rows["compactions"], rows["snapshots"], rows["subagent_links"]) == (1, 1, 1, 1)
    assert set(summary["checksums"]) >= {"message", "session", "turn", "compaction", "snapshot", "forgotten"}
    assert "embeds" in summary["vectors"]
    assert summary["next"] == {"LOSSLESS_DATABASE_URL": postgres_database.url, "LOSSLESS_DATABASE_SCHEMA": "lossless"}

    settings = make_settings(tmp_path / "pg-state", database_url=postgres_database.url)
    with live_sidecar(settings, HashEmbedder()) as server:
        server.wait_for_backlog()  # the copied messages had no vectors: this sidecar embedded them
        for mode in ("vector", "keyword"):
            hits = server.client.get("/v1/search", params={"q": QUESTION, "mode": mode, "k": 3}).json()["hits"]
            assert hits and hits[0]["text"] == FACT, mode
        assert server.client.get("/v1/search", params={"q": FORGOTTEN_WORD, "mode": "keyword"}).json()["hits"] == []

    code, out, err = cli(
        capsys, "import", "--jsonl", str(before_forget), "--database-url", postgres_database.url,
        "--state-dir", str(tmp_path / "pg-state"), "--json",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["forgotten"] == 1  # the older file cannot bring it back
    assert FORGOTTEN_WORD not in export(capsys, "--database-url", postgres_database.url, "--state-dir", str(tmp_path))


def test_an_interrupted_copy_is_finished_by_running_it_again(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Ctrl-C part way through the second chunk of messages: what was committed stays, the rerun adds the rest."""
    state = source[0]
    monkeypatch.setattr(copy, "CHUNK", 4)
    real_import = pg_transfer.restore_jsonl
    calls: list[Path] = []

    def cut_short(db: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        calls.append(path)
        if len(calls) < 3:  # the records, then the first chunk
            return real_import(db, path, *args, **kwargs)
        half = path.with_name("half.jsonl")
        half.write_text("".join(path.read_text().splitlines(keepends=True)[:2]))
        real_import(db, half, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(pg_transfer, "restore_jsonl", cut_short)
    spool = tmp_path / "spool"
    spool.mkdir()
    code, _, _ = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url,
                     "--spool-dir", str(spool))  # fmt: skip
    assert code == 130
    assert calls[0].parent.parent == spool and list(spool.iterdir()) == []  # spooled there, removed when stopped
    assert messages_in(postgres_database.url) == 6
    monkeypatch.setattr(pg_transfer, "restore_jsonl", real_import)

    summary = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    assert summary["resumedAfter"] == 6 and summary["copied"]["messages"] == 21 - 6
    assert summary["copied"]["sessions"] == 0 and summary["rows"]["messages"] == 21
    source_export = export(capsys, "--state-dir", str(state))
    assert export(capsys, "--database-url", postgres_database.url, "--state-dir", str(state)) == source_export

    again = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    assert again["copied"]["messages"] == 0 and again["rows"] == summary["rows"]


def test_postgresql_moved_back_to_a_sqlite_file_exports_the_same_bytes(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = source[0]
    migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    back = tmp_path / "back" / "lossless.sqlite"
    pg_source = ("--database-url", postgres_database.url, "--state-dir", str(tmp_path / "pg-state"))
    summary = migrate(capsys, *pg_source, "--to", str(back))
    assert summary["next"] == {"LOSSLESS_DATABASE_URL": None, "LOSSLESS_DB_PATH": str(back)}
    original = export(capsys, "--state-dir", str(state))
    assert export(capsys, "--db-path", str(back), "--state-dir", str(tmp_path)) == original
    assert export(capsys, *pg_source) == original


def test_a_password_in_the_url_is_used_but_never_shown(
    source: tuple[Path, Path], postgres_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    with_password = postgres_database.url.replace("postgres@", f"postgres:{PASSWORD}@", 1)
    assert PASSWORD in with_password
    code, out, err = cli(capsys, "migrate-store", "--state-dir", str(source[0]), "--to", with_password)
    assert code == 0, err
    assert PASSWORD not in out + err
    assert f"LOSSLESS_DATABASE_URL={shlex.quote(postgres_database.url)} " in out

    in_query = f"{postgres_database.url}&password={PASSWORD}"
    code, out, err = cli(capsys, "migrate-store", "--state-dir", str(source[0]), "--to", in_query, "--to-schema", "q")
    assert code == 0, err
    assert PASSWORD not in out + err and "password=" not in out

    stranger = postgres_database.url.replace("postgres@", f"nobody_here:{PASSWORD}@", 1)
    code, out, err = cli(capsys, "migrate-store", "--state-dir", str(source[0]), "--to", stranger, "--to-schema", "x")
    assert code == 1 and "nobody_here" in err and PASSWORD not in out + err


def test_a_target_that_is_the_source_is_refused(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = source[0]
    alias = tmp_path / "alias.sqlite"
    alias.symlink_to(state / "lossless.sqlite")
    code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", str(alias))
    assert code == 2 and "the source itself" in err

    migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    respelled = postgres_database.url + "&application_name=another-spelling"
    pg_source = ("--database-url", postgres_database.url, "--state-dir", str(tmp_path / "pg"))
    code, _, err = cli(capsys, "migrate-store", *pg_source, "--to", respelled)
    assert code == 2 and "the source itself" in err
    assert migrate(capsys, *pg_source, "--to", respelled, "--to-schema", "elsewhere")["rows"]["messages"] == 21


def test_a_target_holding_other_history_or_something_else_is_refused_and_left_alone(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = source[0]
    other = tmp_path / "other"
    with live_sidecar(make_settings(other, embedding_provider="none"), None) as server:
        server.post("commit-turn", commit_body(conversation(1, seed=99)[0], session="s-other"))
    migrate(capsys, "--state-dir", str(other), "--to", postgres_database.url)
    before = export(capsys, "--database-url", postgres_database.url, "--state-dir", str(tmp_path))
    code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url)
    assert code == 2 and "holds other messages" in err
    assert export(capsys, "--database-url", postgres_database.url, "--state-dir", str(tmp_path)) == before

    foreign = tmp_path / "notes.sqlite"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    content = foreign.read_bytes()
    code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", str(foreign))
    assert code == 2 and "not an openclaw-lossless store" in err and foreign.read_bytes() == content

    with psycopg.connect(postgres_database.url, autocommit=True) as conn:
        conn.execute("CREATE SCHEMA billing; CREATE TABLE billing.invoices (id int)")
    code, _, err = cli(
        capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url, "--to-schema", "billing"
    )
    assert code == 2 and "not an openclaw-lossless store" in err
    with psycopg.connect(postgres_database.url) as conn:
        assert applied_names(conn, "billing") is None


def test_a_source_its_sidecar_is_serving_is_refused_until_it_stops(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """On either backend: the sidecar answering on the configured port for this very store."""
    state, back = source[0], tmp_path / "back.sqlite"
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        port = str(server.settings.port)
        code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--port", port,
                           "--to", postgres_database.url)  # fmt: skip
    assert code == 2 and "stop it first" in err
    with psycopg.connect(postgres_database.url) as conn:
        assert applied_names(conn, "lossless") is None  # nothing was created on the target
    assert migrate(capsys, "--state-dir", str(state), "--port", port, "--to", postgres_database.url)["verified"]

    pg_state = tmp_path / "pg-state"  # the PostgreSQL store just made, served by a sidecar of its own
    pg_source = ("--database-url", postgres_database.url, "--state-dir", str(pg_state))
    served = make_settings(pg_state, database_url=postgres_database.url, embedding_provider="none")
    with live_sidecar(served, None):
        code, _, err = cli(capsys, "migrate-store", *pg_source, "--port", str(served.port), "--to", str(back))
    assert code == 2 and "stop it first" in err and not back.exists()
    assert migrate(capsys, *pg_source, "--to", str(back))["rows"]["messages"] == 21


def test_bad_arguments_are_refused(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = str(source[0])
    refusals = {
        ("--state-dir", str(tmp_path / "none"), "--to", postgres_database.url): "no store at",
        ("--state-dir", state, "--to", str(tmp_path / "x.sqlite"), "--to-schema", "s"): "--to-schema",
        ("--state-dir", state, "--to", postgres_database.url, "--to-schema", "Bad-Name"): "schema name",
        ("--state-dir", state, "--to", "mysql://host/db"): "postgresql://",
        ("--state-dir", state, "--to", str(tmp_path)): "is a folder",
    }
    for args, message in refusals.items():
        code, _, err = cli(capsys, "migrate-store", *args)
        assert (code, message in err) == (2, True), (args, err)
    assert not (tmp_path / "none").exists() and not (tmp_path / "x.sqlite").exists()


def test_a_source_written_to_during_the_copy_fails_the_check_and_says_why(
    postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sidecar left running on the source (here: a turn committed while the messages are copied) is caught by
    the check, exit 1, with the tables that changed and what to do."""
    state = tmp_path / "busy"
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        for turn in conversation(3):
            server.post("commit-turn", commit_body(turn))
    real_import = pg_transfer.restore_jsonl

    def meanwhile(db: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.name.startswith("messages-"):
            writer = Sidecar(make_settings(state, embedding_provider="none"), start_worker=False)
            try:
                writer.ingest.commit_turn("late", "s-late", MAIN, [{"role": "user", "content": "late words"}],
                                          heartbeat=False, recall=writer.settings.recall)  # fmt: skip
            finally:
                writer.close()
        return real_import(db, path, *args, **kwargs)

    monkeypatch.setattr(pg_transfer, "restore_jsonl", meanwhile)
    code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url)
    assert code == 1
    assert "the source changed while it was copied (sessions, turns, messages)" in err
    assert "rows of messages: source 7, target 6" in err

    monkeypatch.setattr(pg_transfer, "restore_jsonl", real_import)  # the writer stopped: the same command again
    summary = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    assert summary["copied"]["messages"] == 1 and summary["copied"]["sessions"] == 1


def test_a_copy_cut_short_is_not_resumed_once_the_source_went_on(
    postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sidecar was started again between the runs and a subagent ended: the target's link no longer matches
    the source's (a record present is not imported again, so the copy would fail its check at the end), so the
    rerun is refused before it writes."""
    state = tmp_path / "went-on"
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        for turn in conversation(3):
            server.post("commit-turn", commit_body(turn))
        assert server.post("subagent-spawn", {"parentSessionKey": MAIN, "childSessionKey": CHILD}).status_code == 200
        server.post("commit-turn", commit_body(conversation(1, session="s-child")[0], session="s-child", key=CHILD))
    monkeypatch.setattr(copy, "CHUNK", 2)
    real_import = pg_transfer.restore_jsonl

    def interrupted(db: Any, path: Path, *args: Any, **kwargs: Any) -> Any:
        if path.name == "messages-000001.jsonl":
            raise KeyboardInterrupt
        return real_import(db, path, *args, **kwargs)

    monkeypatch.setattr(pg_transfer, "restore_jsonl", interrupted)
    assert cli(capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url)[0] == 130
    monkeypatch.setattr(pg_transfer, "restore_jsonl", real_import)
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        assert server.post("subagent-ended", {"childSessionKey": CHILD, "reason": "completed"}).status_code == 200
    before = export(capsys, "--database-url", postgres_database.url, "--state-dir", str(tmp_path))

    code, _, err = cli(capsys, "migrate-store", "--state-dir", str(state), "--to", postgres_database.url)
    assert code == 2 and f"the source changed since this copy was cut short (its subagentLink {CHILD!r}" in err
    assert export(capsys, "--database-url", postgres_database.url, "--state-dir", str(tmp_path)) == before
    fresh = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url, "--to-schema", "fresh")
    assert fresh["rows"]["messages"] == 9  # three turns and the child's of two, and its outcome copied


def test_a_copy_killed_with_sigkill_is_finished_by_running_it_again(
    source: tuple[Path, Path], postgres_database: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real command in a process of its own, killed (SIGKILL: no cleanup of any kind) while it waits to write
    its first messages (the lock that orders message ids, held here, stops it there): the records it committed
    stay, and the same command again finishes and verifies."""
    state = source[0]
    command = [sys.executable, "-m", "openclaw_lossless", "migrate-store", "--state-dir", str(state),
               "--port", str(NOBODY_PORT), "--to", postgres_database.url]  # fmt: skip
    with psycopg.connect(postgres_database.url) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (ID_ORDER_LOCK,))  # no message goes in while it is held
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            waiting = "SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'advisory'"
            deadline = time.monotonic() + 120
            while holder.execute(waiting).fetchone() == (0,):
                assert process.poll() is None, process.communicate()[1]
                assert time.monotonic() < deadline, "the copy never reached the messages"
                time.sleep(0.05)
        finally:
            process.send_signal(signal.SIGKILL)
            process.communicate()
    assert process.returncode == -signal.SIGKILL
    with psycopg.connect(postgres_database.url) as conn:
        taken = conn.execute("SELECT (SELECT count(*) FROM lossless.turns), (SELECT count(*) FROM lossless.messages)")
        assert taken.fetchone() == (11, 0)  # killed after the records were committed, before any message

    summary = migrate(capsys, "--state-dir", str(state), "--to", postgres_database.url)
    assert summary["copied"]["messages"] == 21 and summary["copied"]["sessions"] == 0
    source_export = export(capsys, "--state-dir", str(state))
    assert export(capsys, "--database-url", postgres_database.url, "--state-dir", str(state)) == source_export


def test_export_and_import_round_trip_across_backends_from_the_command_line(
    source: tuple[Path, Path], postgres_database: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without migrate-store: a SQLite export imported into PostgreSQL, and PostgreSQL's export into a new SQLite
    file, each export the same bytes (tombstones included)."""
    original = export(capsys, "--state-dir", str(source[0]))
    from_sqlite, from_postgres = tmp_path / "sqlite.jsonl", tmp_path / "postgres.jsonl"
    from_sqlite.write_text(original)
    pg = ("--database-url", postgres_database.url, "--state-dir", str(tmp_path / "pg"))
    code, _, err = cli(capsys, "import", "--jsonl", str(from_sqlite), *pg)
    assert code == 0, err
    from_postgres.write_text(export(capsys, *pg))
    assert from_postgres.read_text() == original and '"type": "forgotten"' in original

    back = ("--db-path", str(tmp_path / "back.sqlite"), "--state-dir", str(tmp_path / "back"))
    code, _, err = cli(capsys, "import", "--jsonl", str(from_postgres), *back)
    assert code == 0, err
    assert export(capsys, *back) == original
