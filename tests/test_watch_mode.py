"""Watch mode: with no hook at all, every turn the host records is stored from its transcripts, exactly once.

The host's transcripts are written the host's way (``test_history_import``'s 2026.9.6 SQLite writer, a
2026.7.1-era JSONL file); the sidecar is the real app over real HTTP with its watch thread running, as
``serve --watch`` runs it. Switching to engine mode (commit-turn) and back must neither lose nor duplicate.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.transcripts import catchup
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings
from tests.test_catch_up import HostSession, assert_exactly_once, host_messages, stored_originals
from tests.test_history_import import AgentDatabase, Transcript, file_digests

WAIT_S = 30.0  # a generous bound for a loaded machine: the tests wait for behaviour, they do not time it


@pytest.fixture(autouse=True)
def brisk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written this instant count as settled: the same behaviour, without the 2 s re-reads."""
    monkeypatch.setattr(catchup, "SETTLE_S", 0.0)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path / "state", watch=True, watch_interval_s=0.1)
    with live_sidecar(settings, HashEmbedder()) as server:
        yield server


def wait_for_messages(server: LiveSidecar, session_id: str, count: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT_S
    while True:
        response = server.client.get(f"/v1/sessions/{session_id}/messages", params={"last": 1000})
        found = response.json()["messages"] if response.status_code == 200 else []
        if len(found) >= count:
            return [m["original"] for m in found]
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(found)} of {count} messages stored: {server.client.get('/stats').json()}")
        time.sleep(0.05)


def settled(server: LiveSidecar) -> None:
    """One more complete watch look at every file, changed or not: anything it would store is stored."""
    check = server.sidecar.catch_up
    check._seen.clear()  # forget what was seen, so the next look reads everything past the cursors
    looks, deadline = check.looks, time.monotonic() + WAIT_S
    while check.looks < looks + 2 and time.monotonic() < deadline:
        time.sleep(0.02)


def test_every_turn_of_every_agent_is_stored_once_with_no_hook_and_the_transcripts_untouched(
    watching: LiveSidecar,
) -> None:
    state = watching.settings.openclaw_state
    main_db, ops_db = AgentDatabase(state), AgentDatabase(state, "ops")
    try:
        main = HostSession(main_db)
        ops = HostSession(ops_db, "7d0e-ops-session", "agent:ops:main")
        for n in range(5):
            main.turn(f"Main turn {n}: the lantern count is {n * 7}.", tool=n == 2)
            wait_for_messages(watching, main.session_id, len(host_messages(main_db, main.session_id)))
            ops.turn(f"Ops turn {n}.")
            wait_for_messages(watching, ops.session_id, len(host_messages(ops_db, ops.session_id)))
        before = file_digests(state)
        settled(watching)
        assert file_digests(state) == before  # read-only: not a byte of the host's files changed
        assert_exactly_once(watching, main_db, main.session_id)
        assert_exactly_once(watching, ops_db, ops.session_id)
        hits = watching.client.get("/v1/search", params={"q": "lantern count 28", "mode": "keyword"}).json()["hits"]
        assert any("lantern count is 28" in hit["text"] for hit in hits)
        health = watching.client.get("/healthz").json()
        assert health["catchUp"]["watching"] == ["openclaw"]
    finally:
        main_db.close()
        ops_db.close()


def test_a_legacy_jsonl_transcript_is_watched_too_and_a_half_written_line_waits(watching: LiveSidecar) -> None:
    sessions = watching.settings.openclaw_state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    session_id = "0f3a9c2e-legacy"
    t = Transcript(session_id, int(time.time() * 1000) - 60_000)
    path = sessions / f"{session_id}.jsonl"
    (sessions / "sessions.json").write_text(json.dumps({"agent:main:main": {"sessionId": session_id}}))
    path.write_text(json.dumps(t.header()) + "\n" + json.dumps(t.user("Where is the spare key?")) + "\n")
    wait_for_messages(watching, session_id, 1)
    reply = json.dumps(t.assistant("Under the blue flowerpot.")) + "\n"
    with path.open("a") as file:
        file.write(reply[:25])  # the host is mid-write
    settled(watching)
    assert len(stored_originals(watching, session_id)) == 1
    with path.open("a") as file:
        file.write(reply[25:])
    stored = wait_for_messages(watching, session_id, 2)
    settled(watching)
    assert [m["role"] for m in stored_originals(watching, session_id)] == ["user", "assistant"]
    assert "flowerpot" in json.dumps(stored[1])


def test_switching_from_watch_to_engine_mode_and_back_neither_loses_nor_duplicates(watching: LiveSidecar) -> None:
    """Watch stores two turns; the engine is selected and commits them again (the host re-delivers or the
    next assemble shows them) and a new one; back in watch mode, the host records more: each message once."""
    host = AgentDatabase(watching.settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 60_000)
        watched = [main.turn("Watched turn one."), main.turn("Watched turn two, with a tool.", tool=True)]
        wait_for_messages(watching, main.session_id, len(host_messages(host, main.session_id)))
        for body in watched:  # engine mode now: the same messages committed through the hook
            assert watching.post("commit-turn", body).json()["stored"] == 0
        engine_turn = main.turn("Engine turn three.")
        assert watching.post("commit-turn", engine_turn).json()["stored"] == 2
        main.turn("Watched again: turn four.")  # back to watch mode: only the transcript has it
        wait_for_messages(watching, main.session_id, len(host_messages(host, main.session_id)))
        settled(watching)
        assert_exactly_once(watching, host, main.session_id)
    finally:
        host.close()


def test_engine_turns_first_then_watch_mode_stores_nothing_twice(tmp_path: Path) -> None:
    """A store filled by the engine, then run with --watch: the first look imports only what it lacked."""
    settings = make_settings(tmp_path / "state", catch_up=False)
    host = AgentDatabase(settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 60_000)
        with live_sidecar(settings, HashEmbedder()) as server:
            for n in range(3):
                assert server.post("commit-turn", main.turn(f"Engine turn {n}.", tool=n == 1)).json()["stored"] > 0
        main.turn("A turn the engine never saw.")
        other = HostSession(host, str(uuid.uuid4()), "agent:main:side")  # a session live capture never saw
        other.turn("Side chat turn.")
        watch = settings.model_copy(update={"watch": True, "watch_interval_s": 0.1, "catch_up": False})
        with live_sidecar(watch, HashEmbedder()) as server:
            wait_for_messages(server, main.session_id, len(host_messages(host, main.session_id)))
            wait_for_messages(server, other.session_id, 2)
            settled(server)
            assert_exactly_once(server, host, main.session_id)
            assert_exactly_once(server, host, other.session_id)
    finally:
        host.close()
