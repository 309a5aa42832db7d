"""Forgetting on request: gone from every table, the raw database bytes, the WAL and the archives, and kept
from coming back by a replayed turn, an import of the host's transcripts or of an older export.

Everything real: the live sidecar over HTTP, SQLite with FTS5 and sqlite-vec in a temp dir, the CLI on the file.
"""

from __future__ import annotations

import gzip
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.store.model.rewrite import cache_key
from openclaw_lossless.store.model.transfer.export import ExportScope, write_jsonl
from openclaw_lossless.transcripts import read_transcripts
from tests.helpers import (
    HashEmbedder,
    LiveSidecar,
    assert_error,
    db_fingerprint,
    live_sidecar,
    make_settings,
    on_postgres,
    run_cli,
    store_rows,
)
from tests.test_history_import import Transcript
from tests.test_history_import import write_jsonl as write_transcript

SESSION = "0b1e6c1a-5a55-4d0e-9a4e-3f1c2b9e8a7d"
KEY = "agent:main:main"
MARKER = "zqxvarkmarker"  # one word, so FTS5 holds it as a term of its own
ARCHIVED_MARKER = "qjwbarchivedmarker"
T0 = 1_780_000_000_000


def _turn(transcript: Transcript, key: str, user: str, reply: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    entries = [transcript.user(user), transcript.assistant(reply)]
    body = {"advancementKey": key, "sessionId": SESSION, "sessionKey": KEY, "messages": [e["message"] for e in entries]}
    return body, entries


def _raw_bytes(state: Path) -> bytes:
    """The database file and its WAL, as a hex editor would see them (a SQLite store's; on PostgreSQL the
    files are the server's, and what a forget leaves in them is its own test's, tests/postgres)."""
    return b"".join(path.read_bytes() for path in sorted(state.glob("lossless.sqlite*")) if path.is_file())


def _archive_bytes(state: Path) -> bytes:
    return b"".join(gzip.decompress(path.read_bytes()) for path in sorted((state / "archive").glob("*.jsonl.gz")))


def _ids_holding(server: LiveSidecar, word: str) -> list[int]:
    rows = store_rows(server.settings, "SELECT id FROM messages WHERE text LIKE ? ORDER BY id", (f"%{word}%",))
    return [int(r[0]) for r in rows]


def test_a_forgotten_message_is_gone_from_the_bytes_and_does_not_come_back(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    state = settings.state_dir
    transcript = Transcript(SESSION, T0)
    old_body, old_entries = _turn(transcript, "turn-0", f"The old code word is {ARCHIVED_MARKER}.", "Noted, old.")
    with live_sidecar(settings, HashEmbedder()) as server:
        assert server.post("commit-turn", old_body).json()["status"] == "committed"
        server.sidecar.ops.archive.prune(
            server.sidecar.db, settings.archive_dir, 0.0001
        )  # the first turn goes to an archive
        body, entries = _turn(transcript, "turn-1", f"My door code is {MARKER} remember it.", "I will remember.")
        filler = [_turn(transcript, f"turn-{n}", f"Filler {n} about tomatoes.", f"Reply {n}.") for n in range(2, 6)]
        for turn_body in [body, *(b for b, _ in filler)]:
            assert server.post("commit-turn", turn_body).json()["status"] == "committed"
        server.wait_for_backlog()
        export = tmp_path / "older-export.jsonl"
        with export.open("w") as out:
            write_jsonl(server.sidecar.ops.transfer.export_store(server.sidecar.db.reader(), ExportScope()), out)
        on_file = not on_postgres(settings)
        assert MARKER.encode() in _raw_bytes(state) or not on_file
        assert ARCHIVED_MARKER.encode() in _archive_bytes(state)
        [marked] = _ids_holding(server, MARKER)
        old_said = old_entries[0]["message"]["timestamp"] / 1000  # the archived marker's time

        dry = server.client.request("DELETE", f"/v1/messages/{marked}", params={"dryRun": "true"}).json()
        assert dry["dryRun"] is True and [m["citation"] for m in dry["messages"]] == [f"msg:{marked}"]
        assert MARKER in dry["messages"][0]["excerpt"] and _ids_holding(server, MARKER) == [marked]

        gone = server.client.request("DELETE", f"/v1/messages/{marked}")
        assert gone.status_code == 200, gone.text
        assert gone.json()["forgotten"] == 1 and gone.json()["walTruncated"] is True
        in_time = {"sessionId": SESSION, "since": old_said, "until": old_said}
        archived = server.client.post("/v1/forget", json=in_time).json()
        assert archived["archived"] == 1 and archived["archiveFilesRewritten"] == 1

        for word in (MARKER, ARCHIVED_MARKER):
            assert word.encode() not in _raw_bytes(state), f"{word} still in the database file or WAL"
            assert word.encode() not in _archive_bytes(state), f"{word} still in an archive"
            hits = server.client.get("/v1/search", params={"q": word, "mode": "keyword"}).json()["hits"]
            assert hits == []
        assert server.sidecar.index is not None and server.sidecar.index.vector(marked) is None
        assert server.client.get("/stats").json()["forgotten"] == 2

        # it does not come back: the turn replayed, its messages in a new turn, the host's transcript, an old export
        assert server.post("commit-turn", body).json()["status"] == "duplicate"
        again = body | {"advancementKey": "turn-1-redelivered"}
        assert server.post("commit-turn", again).json()["stored"] == 0  # the reply is stored already, once
        sessions = tmp_path / "openclaw" / "agents" / "main" / "sessions"
        write_transcript(sessions / f"{SESSION}.jsonl", [transcript.header(), *old_entries, *entries])
        (sessions / "sessions.json").write_text(json.dumps({"main": {"sessionId": SESSION, "updatedAt": T0}}))
        read_transcripts(server.sidecar.ingest, tmp_path / "openclaw")
        server.sidecar.ops.transfer.restore_jsonl(server.sidecar.db, export, server.sidecar.capture_options)
        archived_again = server.client.get("/v1/search", params={"q": ARCHIVED_MARKER, "mode": "keyword"})
        assert archived_again.json()["hits"] == []
        assert _ids_holding(server, MARKER) == [] and _ids_holding(server, ARCHIVED_MARKER) == []
        assert MARKER.encode() not in _raw_bytes(state)


def test_bad_input_is_refused_and_changes_nothing(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    for n in range(3):
        sidecar.post("commit-turn", _turn(transcript, f"t{n}", f"Question {n} about lanterns.", f"Answer {n}.")[0])
    before = db_fingerprint(sidecar.settings)
    refusals: list[tuple[dict[str, Any], int, str]] = [
        ({"ids": ["msg:999"]}, 404, "not_found"),  # an unknown citation
        ({"ids": ["msg:1", "msg:999"]}, 404, "not_found"),  # one unknown among known ones: nothing goes
        ({"ids": ["seven"]}, 422, "invalid_request"),
        ({"match": "?!"}, 422, "invalid_request"),  # no words
        ({"match": "unheardofword"}, 422, "invalid_request"),  # matches nothing
        ({"since": 0}, 422, "invalid_request"),  # a time range alone selecting everything
        ({"since": 0, "until": 1}, 422, "invalid_request"),  # selecting nothing
        ({"sessionId": "no-such-session"}, 404, "not_found"),
        ({"agentId": "nobody"}, 404, "not_found"),
        ({}, 422, "invalid_request"),  # no selector
    ]
    for body, status, code in refusals:
        assert_error(sidecar.client.post("/v1/forget", json=body), status, code)
    assert_error(sidecar.client.delete("/v1/messages/999"), 404, "not_found")
    assert_error(sidecar.client.delete("/v1/sessions/nope"), 404, "not_found")
    assert db_fingerprint(sidecar.settings) == before
    everything = sidecar.client.post("/v1/forget", json={"since": 0, "all": True, "dryRun": True}).json()
    assert everything["forgotten"] == 6 and db_fingerprint(sidecar.settings) == before


def test_a_match_shows_each_message_in_full_and_forgets_only_those(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    sidecar.post("commit-turn", _turn(transcript, "a", "The vault combination is 31-22-7.", "Noted the vault.")[0])
    sidecar.post("commit-turn", _turn(transcript, "b", "Lunch is at noon.", "Fine.")[0])
    dry = sidecar.client.post("/v1/forget", json={"match": "vault combination", "dryRun": True}).json()
    assert [m["text"] for m in dry["messages"]] == ["The vault combination is 31-22-7."]
    done = sidecar.client.post("/v1/forget", json={"match": "vault combination"}).json()
    assert done["forgotten"] == 1
    texts = [m["text"] for m in sidecar.client.get(f"/v1/sessions/{SESSION}/messages").json()["messages"]]
    assert texts == ["Noted the vault.", "Lunch is at noon.", "Fine."]


def test_forgetting_a_session_mid_turn_never_half_deletes_a_turn(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    sidecar.post("commit-turn", _turn(transcript, "first", "Hello there.", "Hi.")[0])
    bodies = [_turn(transcript, f"busy-{n}", f"Busy {n} question.", f"Busy {n} answer.")[0] for n in range(40)]
    statuses: list[int] = []

    def commit() -> None:
        for body in bodies:
            statuses.append(sidecar.post("commit-turn", body).status_code)

    writer = threading.Thread(target=commit)
    writer.start()
    forgot = [sidecar.client.delete(f"/v1/sessions/{SESSION}").status_code for _ in range(3)]
    writer.join()
    assert set(statuses) == {200}
    assert set(forgot) <= {200, 422}  # 422: nothing left to forget at that moment
    conn = sidecar.sidecar.db.reader()
    per_turn = conn.execute(
        "SELECT t.message_count, count(m.id) FROM turns t LEFT JOIN messages m ON m.turn_rowid = t.id GROUP BY t.id"
    ).fetchall()
    assert all(stored in (0, count) for count, stored in per_turn), per_turn


def test_the_cli_shows_then_forgets_on_the_file_and_refuses_without_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = make_settings(tmp_path / "state")
    transcript = Transcript(SESSION, T0)
    with live_sidecar(settings, HashEmbedder()) as server:
        server.post("commit-turn", _turn(transcript, "a", f"The key is {MARKER}.", "Got it.")[0])
        server.post("commit-turn", _turn(transcript, "b", "Unrelated chat.", "Sure.")[0])
    state = settings.state_dir
    before = db_fingerprint(settings)
    code, out, _ = run_cli(capsys, state, "forget", "msg:1", "--dry-run")
    assert code == 0 and "msg:1" in out and MARKER in out and "would forget 1" in out
    assert run_cli(capsys, state, "forget", "msg:77", "--yes")[0] == 2
    assert run_cli(capsys, state, "forget", "--since", "2000-01-01", "--yes")[0] == 2
    assert run_cli(capsys, state, "forget", "--match", "?!", "--yes")[0] == 2
    code, _, err = run_cli(capsys, state, "forget", "msg:1")  # stdin is not a terminal here
    assert code == 2 and "--yes" in err
    assert db_fingerprint(settings) == before
    code, out, _ = run_cli(capsys, state, "forget", "msg:1", "--yes")
    assert code == 0 and "forgot 1" in out
    assert MARKER.encode() not in _raw_bytes(state)
    code, out, _ = run_cli(capsys, state, "doctor", "--json")
    finding = next(f for f in json.loads(out)["findings"] if f["check"] == "forgotten")
    assert finding["ok"] is True


def test_an_export_carries_the_tombstones_and_its_import_forgets_there_too(tmp_path: Path) -> None:
    transcript = Transcript(SESSION, T0)
    body = _turn(transcript, "a", f"Pin is {MARKER}.", "Noted.")[0]
    older, newer = tmp_path / "older.jsonl", tmp_path / "newer.jsonl"
    with live_sidecar(make_settings(tmp_path / "one"), HashEmbedder()) as one:
        one.post("commit-turn", body)
        with older.open("w") as out:
            write_jsonl(one.sidecar.ops.transfer.export_store(one.sidecar.db.reader(), ExportScope()), out)
        one.client.delete("/v1/messages/1").raise_for_status()
        with newer.open("w") as out:
            write_jsonl(one.sidecar.ops.transfer.export_store(one.sidecar.db.reader(), ExportScope()), out)
    lines = [json.loads(line) for line in newer.read_text().splitlines()]
    tombstones = [line for line in lines if line.get("type") == "forgotten"]
    assert len(tombstones) == 1 and MARKER not in newer.read_text()
    with live_sidecar(make_settings(tmp_path / "two"), HashEmbedder()) as two:
        options, restore_jsonl = two.sidecar.capture_options, two.sidecar.ops.transfer.restore_jsonl
        assert restore_jsonl(two.sidecar.db, older, options).imported == 2  # a store that never forgot it
        report = restore_jsonl(two.sidecar.db, newer, options)
        assert report.tombstones == 1
        assert _ids_holding(two, MARKER) == [] and two.client.get("/stats").json()["forgotten"] == 1
        assert restore_jsonl(two.sidecar.db, older, options).forgotten == 1  # and the older file cannot undo it
        assert _ids_holding(two, MARKER) == []


def test_a_session_forgotten_whole_is_not_brought_back_by_bootstrap_or_catch_up(sidecar: LiveSidecar) -> None:
    transcript = Transcript(SESSION, T0)
    body, entries = _turn(transcript, "a", f"Session secret {MARKER}.", "Kept quiet.")
    sidecar.post("commit-turn", body)
    sessions = sidecar.settings.openclaw_state / "agents" / "main" / "sessions"
    write_transcript(sessions / f"{SESSION}.jsonl", [transcript.header(), *entries])
    (sessions / "sessions.json").write_text(json.dumps({"main": {"sessionId": SESSION, "updatedAt": T0}}))
    gone = sidecar.client.delete(f"/v1/sessions/{SESSION}").json()
    assert gone["forgotten"] == 2 and gone["sessions"] == [SESSION]
    assert sidecar.post("bootstrap", {"sessionId": SESSION, "sessionKey": KEY}).status_code == 200
    read_transcripts(sidecar.sidecar.ingest, sidecar.settings.openclaw_state)  # what the catch-up runs
    assert sidecar.client.get(f"/v1/sessions/{SESSION}/messages").json()["messages"] == []
    assert MARKER.encode() not in _raw_bytes(sidecar.settings.state_dir)


def test_an_agents_forget_reaches_only_its_own_history(sidecar: LiveSidecar) -> None:
    mine = _turn(Transcript(SESSION, T0), "a", "Main agent note.", "Ok.")[0]
    other = {**_turn(Transcript("s-ops", T0), "b", "Ops agent note.", "Ok.")[0], "sessionId": "s-ops",
             "sessionKey": "agent:ops:main"}  # fmt: skip
    sidecar.post("commit-turn", mine)
    sidecar.post("commit-turn", other)
    before = db_fingerprint(sidecar.settings)
    assert_error(sidecar.client.post("/v1/forget", json={"ids": ["msg:3"], "agentId": "main"}), 404, "not_found")
    assert db_fingerprint(sidecar.settings) == before
    done = sidecar.client.post("/v1/forget", json={"ids": ["msg:1"], "agentId": "main"}).json()
    assert [m["citation"] for m in done["messages"]] == ["msg:1"]


def test_a_forgotten_messages_citation_is_never_given_to_a_new_one(tmp_path: Path) -> None:
    """Forgetting the newest messages, then the next turn (also after a restart): the new messages get new
    citations, and a forgotten one's citation stays not found rather than showing other words."""
    settings = make_settings(tmp_path / "state")
    transcript = Transcript(SESSION, T0)
    with live_sidecar(settings, HashEmbedder()) as server:
        for n in range(2):
            server.post("commit-turn", _turn(transcript, f"turn-{n}", f"Plan {n} for the garden.", f"Ok {n}.")[0])
        newest = _ids_holding(server, "Ok 1.") + _ids_holding(server, "Plan 1 for")
        forgotten = server.client.post("/v1/forget", json={"ids": [f"msg:{i}" for i in newest]})
        assert forgotten.status_code == 200 and forgotten.json()["forgotten"] == 2, forgotten.text

        body, _ = _turn(transcript, "turn-2", "A new plan for the orchard.", "Noted, the orchard.")
        assert server.post("commit-turn", body).json()["status"] == "committed"
        after_forget = _ids_holding(server, "orchard")
        for gone in newest:
            assert server.client.get(f"/v1/messages/{gone}").status_code == 404

    with live_sidecar(settings, HashEmbedder()) as server:  # what the store keeps outlives the process
        for i in after_forget:
            server.client.delete(f"/v1/messages/{i}").raise_for_status()
        body, _ = _turn(transcript, "turn-3", "Then the plan for the pond.", "Noted, the pond.")
        assert server.post("commit-turn", body).json()["status"] == "committed"
        after_restart = _ids_holding(server, "pond")
        for gone in [*newest, *after_forget]:
            assert server.client.get(f"/v1/messages/{gone}").status_code == 404

    assert len(after_forget) == len(after_restart) == 2
    assert min(after_forget) > max(newest) and min(after_restart) > max(after_forget)


def test_a_forgotten_messages_cached_embedding_goes_with_it(sidecar: LiveSidecar) -> None:
    """An embedding API's vectors are cached by the text's hash: a forgotten text's entry is deleted too, so
    the store holds nothing derived from it (a kept text's entry stays)."""
    transcript = Transcript(SESSION, T0)
    body, _ = _turn(transcript, "a", f"The boat is named {MARKER}.", "A fine name.")
    sidecar.post("commit-turn", body)
    sidecar.wait_for_backlog()
    said = f"The boat is named {MARKER}."
    cached = {bytes(r[0]) for r in store_rows(sidecar.settings, "SELECT text_hash FROM embedding_cache")}
    assert cache_key(said) in cached and cache_key("A fine name.") in cached
    [marked] = _ids_holding(sidecar, MARKER)
    assert sidecar.client.delete(f"/v1/messages/{marked}").status_code == 200
    cached = {bytes(r[0]) for r in store_rows(sidecar.settings, "SELECT text_hash FROM embedding_cache")}
    assert cache_key(said) not in cached and cache_key("A fine name.") in cached


@pytest.mark.sqlite_only
def test_a_store_from_an_older_version_is_rebuilt_once_so_old_free_space_holds_no_forgotten_text(
    tmp_path: Path,
) -> None:
    """A store written while ``secure_delete`` was off may hold a row's old bytes in free space (a row an
    UPDATE grew was moved, its old cell left as it was). Its first forget rebuilds the file, once."""
    settings = make_settings(tmp_path / "state")
    state = settings.state_dir
    transcript = Transcript(SESSION, T0)
    with live_sidecar(settings, HashEmbedder()) as server:
        assert store_rows(settings, "SELECT value FROM meta WHERE key = 'free_space_zeroed'") == [("1",)]
        server.post("commit-turn", _turn(transcript, "a", f"The gate opens with {MARKER} now.", "Noted.")[0])
        for n in range(20):
            server.post("commit-turn", _turn(transcript, f"f{n}", f"Filler {n} about tomatoes.", "Ok.")[0])
        server.wait_for_backlog()
        [marked] = _ids_holding(server, MARKER)
        with server.sidecar.db.writer() as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        live = _raw_bytes(state).count(MARKER.encode())  # its text and original (and FTS5's term)
        with server.sidecar.db.writer() as conn:  # what an older version left: bytes freed but not zeroed
            conn.execute("PRAGMA secure_delete = OFF")
            conn.execute("INSERT INTO meta (key, value) VALUES ('old-copy', ?)", (f"a copy of {MARKER} freed",))
            conn.execute("DELETE FROM meta WHERE key IN ('old-copy', 'free_space_zeroed')")
            conn.execute("PRAGMA secure_delete = ON")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        assert _raw_bytes(state).count(MARKER.encode()) == live + 1  # the freed copy is still in the file
        assert server.client.delete(f"/v1/messages/{marked}").status_code == 200
        assert MARKER.encode() not in _raw_bytes(state)
        assert store_rows(settings, "SELECT value FROM meta WHERE key = 'free_space_zeroed'") == [("1",)]
        assert store_rows(settings, "PRAGMA auto_vacuum") == [(2,)]  # incremental, also for a file made without
