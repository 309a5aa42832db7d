"""A damaged or foreign database file: refused with the fix named, reported by doctor, salvaged into a new one.

Each case starts from a real store (a real SQLite file written by the sidecar) and damages it the way disks
and people do: cut short, overwritten with garbage, written by a newer version, indexed by another model.
``serve`` is run as a real process: it must refuse in one line naming the command that repairs the file,
never a traceback. ``salvage`` must copy back only what was really there, byte for byte.

All of it is about the SQLite file (its pages, its copies, salvage), so it runs on the SQLite pass; a damaged
PostgreSQL store is the server's to repair (doctor's amcheck findings: tests/postgres/).
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.salvage.file_format import PageFile, schema_roots
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.sqlite.connection import open_connection
from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, assert_error, live_sidecar, make_settings
from tests.openclaw_state import linked_openclaw_home
from tests.reliability import record

pytestmark = [pytest.mark.sqlite_only, pytest.mark.slow]  # slow: make check leaves it to make test

TURNS = 300
PAGE = 4096
outcomes: dict[str, str] = {}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of TURNS committed and embedded turns, closed cleanly (WAL checkpointed into the file)."""
    state = tmp_path_factory.mktemp("pristine") / "state"
    settings = make_settings(state)
    sidecar = Sidecar(settings, provider=HashEmbedder(), start_worker=False)
    try:
        for turn in conversation(TURNS):
            body = commit_body(turn)
            sidecar.ingest.commit_turn(
                body["advancementKey"],
                "s-main",
                body["sessionKey"],
                turn.messages,
                heartbeat=False,
                recall=settings.recall,
            )
        assert sidecar.worker is not None
        while sidecar.worker.drain_once():
            pass
    finally:
        sidecar.close()
    return state


def damaged_copy(pristine: Path, tmp_path: Path, damage: str) -> Path:
    """A copy of the pristine state dir with its database damaged as named; returns the state dir."""
    state = tmp_path / "state"
    shutil.copytree(pristine, state)
    db = state / "lossless.sqlite"
    data = bytearray(db.read_bytes())
    rng = random.Random(damage)
    if damage == "truncated":
        db.write_bytes(data[: len(data) * 6 // 10 // PAGE * PAGE])
    elif damage == "garbage":
        db.write_bytes(rng.randbytes(len(data)))
    elif damage == "scribbled":  # every 7th page from the 10th overwritten, the header left alone
        for page in range(10, len(data) // PAGE, 7):
            data[page * PAGE : (page + 1) * PAGE] = rng.randbytes(PAGE)
        db.write_bytes(bytes(data))
    elif damage in ("one-message-page", "newest-message-page"):  # one leaf of the messages table, the rest intact
        pages = PageFile.open(db)
        root = dict(schema_roots(pages))["messages"]
        leaves = pages.leaves(root)[0]
        leaf = leaves[len(leaves) // 2] if damage == "one-message-page" else leaves[-1]
        data[(leaf - 1) * PAGE : leaf * PAGE] = rng.randbytes(PAGE)
        db.write_bytes(bytes(data))
    elif damage == "newer":
        conn = open_connection(db)
        conn.execute("INSERT INTO migrations (name, applied_at) VALUES ('m999_from_the_future', 0)")
        conn.close()
    return state


def pages_of(db: Path) -> bytes:
    """The file's bytes minus the header's change counters, which merely opening for writing may bump."""
    data = bytearray(db.read_bytes())
    if data[:16] == b"SQLite format 3\x00":
        data[24:28] = data[92:96] = bytes(4)
    return bytes(data)


def cli(state: Path, *args: str, settings: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI as a user runs it, with no embedder unless ``settings`` (environment variables) name one."""
    env = os.environ | {
        "LOSSLESS_EMBEDDING_PROVIDER": "none",
        "LOSSLESS_OPENCLAW_STATE": str(state.parent / "oc"),
        **(settings or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", *args, "--state-dir", str(state)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def originals(path: Path) -> dict[int, tuple[Any, ...]]:
    conn = open_connection(path, readonly=True)
    try:
        rows = conn.execute("SELECT id, session_rowid, role, text, original, content_hash FROM messages")
        return {int(r[0]): tuple(r[1:]) for r in rows}
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        ("truncated", "salvage"),
        ("garbage", "salvage"),
        ("newer", "upgrade openclaw-lossless"),
    ],
)
def test_serve_refuses_a_damaged_or_newer_database_in_one_line_naming_the_fix(
    pristine: Path, tmp_path: Path, damage: str, says: str
) -> None:
    state = damaged_copy(pristine, tmp_path, damage)
    before = pages_of(state / "lossless.sqlite")
    served = cli(state, "serve", "--port", "9")
    assert served.returncode == 1, served.stderr
    assert "Traceback" not in served.stderr and served.stderr.count("\n") == 1, served.stderr
    assert says in served.stderr
    assert pages_of(state / "lossless.sqlite") == before, "refusing must not write to the file"

    doctor = cli(state, "doctor", "--json")
    assert doctor.returncode == 1
    bad = [f for f in json.loads(doctor.stdout)["findings"] if not f["ok"] and f["check"] != "embedder"]
    assert bad, doctor.stdout
    fix = "openclaw-lossless salvage" if says == "salvage" else "pip install --upgrade openclaw-lossless"
    assert any(fix in (f["fix"] or "") for f in bad), bad
    outcomes[damage] = "serve refuses, doctor names the fix"


@pytest.mark.parametrize("damage", ["truncated", "scribbled"])
def test_salvage_copies_back_exactly_what_was_readable_and_the_result_serves(
    pristine: Path, tmp_path: Path, damage: str
) -> None:
    state = damaged_copy(pristine, tmp_path, damage)
    doctor = cli(state, "doctor", "--json")
    assert doctor.returncode == 1
    assert any("salvage" in (f["fix"] or "") for f in json.loads(doctor.stdout)["findings"] if not f["ok"])

    out = tmp_path / "salvaged.sqlite"
    done = cli(state, "salvage", "--out", str(out), "--json")
    assert done.returncode == 1, done.stderr  # partial: the source was damaged
    report = json.loads(done.stdout)
    assert report["complete"] is False
    assert os.stat(out).st_mode & 0o777 == 0o600

    truth, saved = originals(pristine / "lossless.sqlite"), originals(out)
    assert saved, "nothing was salvaged"
    assert {i: truth[i] for i in saved} == saved, "salvage produced a row that was not in the original"
    lost = len(truth) - len(saved)
    assert report["recovered"]["messages"] == len(saved)
    # Exact while a witness (the full-text index, the vectors, a turn's count, an id gap) survives the
    # damage; a cut that takes the newest messages with every witness of them can only be a lower bound.
    assert 0 < report["messagesMissing"] <= lost, "the report must say that messages could not be read"
    if damage == "scribbled":
        assert report["messagesMissing"] == lost, "the report must say how many messages could not be read"
    assert len(saved) >= len(truth) // 2

    again = cli(state, "salvage", "--out", str(out))
    assert again.returncode == 2 and "already exists" in again.stderr

    settings = make_settings(tmp_path / "served", db_path=out)
    with live_sidecar(settings, HashEmbedder()) as server:
        server.wait_for_backlog()
        stats = server.client.get("/stats").json()
        assert stats["messages"] == len(saved) and stats["vectors"] == len(saved)
        some = next(iter(saved.values()))[2]
        hits = server.client.get("/v1/search", params={"q": some, "mode": "keyword", "k": 50}).json()["hits"]
        assert any(h["text"] == some for h in hits)
        [turn] = conversation(1, session="s-after", seed=77)
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    new_ids = set(originals(out)) - set(saved)
    assert len(new_ids) == 2 and min(new_ids) > max(saved)
    conn = open_connection(out, readonly=True)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        conn.close()
    outcomes[f"salvage-{damage}"] = f"{len(saved)} of {len(truth)} messages back, byte-identical"
    record(f"salvage{damage.title()}", {"messages": len(truth), "salvaged": len(saved), "lost": lost})


def test_the_citations_of_the_newest_messages_salvage_lost_are_not_given_again(pristine: Path, tmp_path: Path) -> None:
    """The page holding the newest messages is lost, their witnesses (keyword index, vectors, turns) are not:
    the salvaged store gives the next message an id above every one the damaged store had given."""
    state = damaged_copy(pristine, tmp_path, "newest-message-page")
    truth = originals(pristine / "lossless.sqlite")
    out = tmp_path / "salvaged.sqlite"
    done = cli(state, "salvage", "--out", str(out), "--json")
    assert done.returncode == 1, done.stderr
    saved = originals(out)
    assert max(saved) < max(truth), "the damage took the newest messages"
    assert json.loads(done.stdout)["messagesMissing"] == len(truth) - len(saved)

    with live_sidecar(make_settings(tmp_path / "served", db_path=out), HashEmbedder()) as server:
        [turn] = conversation(1, session="s-after", seed=77)
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    new_ids = set(originals(out)) - set(saved)
    assert len(new_ids) == 2 and min(new_ids) > max(truth), "a lost message's citation was given to a new one"


def test_salvage_of_a_sound_database_is_complete_and_exit_0(pristine: Path, tmp_path: Path) -> None:
    state = damaged_copy(pristine, tmp_path, "none")
    out = tmp_path / "copy.sqlite"
    done = cli(state, "salvage", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["complete"] is True
    assert originals(out) == originals(pristine / "lossless.sqlite")


def test_salvage_keeps_the_tombstones_and_counts_no_forgotten_message_as_missing(
    pristine: Path, tmp_path: Path
) -> None:
    state = damaged_copy(pristine, tmp_path, "none")
    newest = max(originals(state / "lossless.sqlite"))
    gone = cli(state, "forget", "msg:7", f"msg:{newest}", "--yes")
    assert gone.returncode == 0, gone.stderr
    out = tmp_path / "copy.sqlite"
    done = cli(state, "salvage", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["complete"] is True and report["messagesMissing"] == 0, report
    assert originals(out) == originals(state / "lossless.sqlite")
    assert tombstones(out) == tombstones(state / "lossless.sqlite") and len(tombstones(out)) == 2


def test_salvage_keeps_the_identities_of_the_archived_messages(pristine: Path, tmp_path: Path) -> None:
    """Read again from the archives: a catch-up into the salvaged store does not store them a second time."""
    state = damaged_copy(pristine, tmp_path, "none")
    pruned = cli(state, "prune", "--max-db-size-mb", "0.0001", "--json")
    assert pruned.returncode == 0, pruned.stderr
    out = tmp_path / "copy.sqlite"
    done = cli(state, "salvage", "--out", str(out), "--json")
    assert done.returncode == 0, done.stderr
    assert archived(out) == archived(state / "lossless.sqlite") and len(archived(out)) > 0


def archived(path: Path) -> list[tuple[Any, ...]]:
    conn = open_connection(path, readonly=True)
    try:
        rows = conn.execute(
            "SELECT s.session_id, a.content_hash, a.message_id FROM archived a"
            " JOIN sessions s ON s.id = a.session_rowid ORDER BY a.message_id"
        )
        return [tuple(row) for row in rows]
    finally:
        conn.close()


def tombstones(path: Path) -> list[tuple[Any, ...]]:
    conn = open_connection(path, readonly=True)
    try:
        rows = conn.execute("SELECT session_id, content_hash, window_key, message_id FROM forgotten ORDER BY id")
        return [tuple(row) for row in rows]
    finally:
        conn.close()


def test_salvage_of_garbage_says_nothing_is_readable_and_writes_nothing(pristine: Path, tmp_path: Path) -> None:
    state = damaged_copy(pristine, tmp_path, "garbage")
    out = tmp_path / "nothing.sqlite"
    done = cli(state, "salvage", "--out", str(out))
    assert done.returncode == 1 and "nothing could be read" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_another_embedding_model_is_reported_then_rebuilt_not_mixed(
    pristine: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = damaged_copy(pristine, tmp_path, "none")
    other = HashEmbedder(dimension=48, model="another-model")
    caplog.set_level(logging.WARNING, logger="openclaw_lossless.sidecar")
    with live_sidecar(make_settings(state), other) as server:
        stats = server.client.get("/stats").json()
        assert stats["embedder"]["rebuiltFrom"] == "hash-words/words/64-d"
        assert stats["counters"]["vector_rebuilds"] == 1
        assert any("hash-words/words/64-d" in r.getMessage() for r in caplog.records)
        server.wait_for_backlog()
        after = server.client.get("/stats").json()
        assert after["vectors"] == after["messages"] == 2 * TURNS
    assert set(other.texts) == {m[2] for m in originals(state / "lossless.sqlite").values()}
    outcomes["another-model"] = "logged, in /stats, vectors rebuilt"
    record("corruptDatabase", {"cases": dict(sorted(outcomes.items()))})


def test_doctor_reports_vectors_built_with_another_model_and_leaves_them_alone(pristine: Path, tmp_path: Path) -> None:
    """The store's vectors came from hash-words (64-d); the configured model is an API's (1536-d)."""
    state = damaged_copy(pristine, tmp_path, "none")
    before = pages_of(state / "lossless.sqlite")
    another_model = {
        "LOSSLESS_EMBEDDING_PROVIDER": "openai-compatible",
        "LOSSLESS_EMBEDDING_MODEL": "text-embedding-3-small",
        "LOSSLESS_EMBEDDING_BASE_URL": "http://127.0.0.1:9/v1",  # never asked: doctor makes no request
    }
    another_model |= linked_openclaw_home(tmp_path / "home", state)  # the plugin is wired in: not at fault
    doctor = cli(state, "doctor", "--json", settings=another_model)
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    findings = {f["check"]: f for f in json.loads(doctor.stdout)["findings"]}
    index = findings["index"]
    assert not index["ok"], index
    assert "hash-words/words/64-d" in index["detail"] and "text-embedding-3-small/api/1536-d" in index["detail"]
    assert "rebuilds them at its next start" in index["detail"] and index["fix"] == "openclaw-lossless serve"
    assert [name for name, f in findings.items() if not f["ok"]] == ["index"], "only the index is at fault"
    assert pages_of(state / "lossless.sqlite") == before, "doctor must not rebuild or write anything"


def test_a_read_that_meets_a_damaged_page_answers_store_corrupt_naming_salvage(pristine: Path, tmp_path: Path) -> None:
    """Damage in the middle of the file is invisible until a read reaches it; that read must say so."""
    state = damaged_copy(pristine, tmp_path, "one-message-page")
    with live_sidecar(make_settings(state, embedding_provider="none"), None) as server:
        response = server.client.get("/v1/sessions/s-main/messages", params={"last": 2 * TURNS})
        body = assert_error(response, 500, "store_corrupt")
        assert "openclaw-lossless salvage" in body["error"]["message"]
