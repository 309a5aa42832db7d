"""Catch-up: every turn the host recorded while the sidecar was down ends up stored exactly once.

The host's transcripts are real OpenClaw 2026.9.6 SQLite stores written here (``test_history_import``'s
writer); the store is the real one, reached over real HTTP where the hooks are concerned.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.transcripts import catchup
from openclaw_lossless.transcripts.gaps import GapReport, find_gaps
from tests.helpers import HashEmbedder, LiveSidecar, db_fingerprint, live_sidecar, make_settings
from tests.test_history_import import AgentDatabase, Transcript, file_digests, legacy_sessions

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test

MAIN_KEY = "agent:main:main"
SESSION = "5b1c0f8e-2f0e-4d53-9a55-0c3f8b7d6e21"


def _gaps(server: LiveSidecar, openclaw_state: Path, **narrowing: Any) -> GapReport:
    """The gap report of the store this sidecar serves, read through its own backend (either one)."""
    return find_gaps(server.sidecar.db.reader(), openclaw_state, ops=server.sidecar.ops, **narrowing)


class HostSession:
    """One OpenClaw session written turn by turn, as the host appends a turn's entries to its transcript.

    ``turn`` returns the commit-turn body the host would deliver for it: the turn's AgentMessages, exactly the
    ``message`` of each entry (``readClosedTranscriptTurn``).
    """

    def __init__(self, db: AgentDatabase, session_id: str = SESSION, key: str = MAIN_KEY, start_ms: int = 0) -> None:
        self.db = db
        self.session_id = session_id
        self.key = key
        self.transcript = Transcript(session_id, start_ms or int(time.time() * 1000) - 3_600_000)
        self.turns = 0
        db.add_session(session_id, key)
        db.append(session_id, self.transcript.header())

    def turn(self, text: str, *, tool: bool = False, undated: bool = False) -> dict[str, Any]:
        self.turns += 1
        t = self.transcript
        entries = [t.user(text)]
        if tool:
            call = {"type": "toolCall", "id": f"call-{self.turns}", "name": "read", "arguments": {"path": "notes.md"}}
            entries.append(t.entry("message", message=_assistant([call], t.ms + 1000, "toolUse")))
            result = {
                "role": "toolResult",
                "toolCallId": f"call-{self.turns}",
                "toolName": "read",
                "content": [{"type": "text", "text": f"notes for turn {self.turns}"}],
                "isError": False,
                "timestamp": t.ms + 1000,
            }
            entries.append(t.entry("message", message=result))
        entries.append(
            t.entry("message", message=_assistant([{"type": "text", "text": f"Answer {self.turns}."}], t.ms))
        )
        if undated:
            for entry in entries:
                entry["message"].pop("timestamp", None)
        self.db.append(self.session_id, *entries)
        return {
            "advancementKey": f"turn-{uuid.uuid4()}",
            "sessionId": self.session_id,
            "sessionKey": self.key,
            "messages": [entry["message"] for entry in entries],
        }


def _assistant(content: list[dict[str, Any]], ms: int, stop: str = "stop") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": content,
        "api": "openai-completions",
        "provider": "fake",
        "model": "fake-model",
        "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120},
        "stopReason": stop,
        "timestamp": ms + 1000,
    }


def set_born(db: AgentDatabase, session_id: str, born_ms: int) -> None:
    db.conn.execute("UPDATE session_windows SET created_at = ? WHERE session_id = ?", (born_ms, session_id))


@pytest.fixture(autouse=True)
def brisk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A target may run again after 0.5 s instead of 5 s: the same behaviour, sooner."""
    monkeypatch.setattr(catchup, "MIN_INTERVAL_S", 0.5)


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[LiveSidecar]:
    """The live sidecar with its catch-up thread off: these tests run catch-up themselves, when they say."""
    with live_sidecar(make_settings(tmp_path / "state", catch_up=False), HashEmbedder()) as server:
        yield server


@pytest.fixture
def running(tmp_path: Path) -> Iterator[LiveSidecar]:
    """The live sidecar as ``serve`` runs it: catch-up on, in its own thread."""
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        yield server


@pytest.fixture
def host(sidecar: LiveSidecar) -> Iterator[AgentDatabase]:
    """The agent database in the state dir the sidecar reads ($OPENCLAW_STATE_DIR)."""
    database = AgentDatabase(sidecar.settings.openclaw_state)
    yield database
    database.close()


def stored_originals(server: LiveSidecar, session_id: str) -> list[dict[str, Any]]:
    response = server.client.get(f"/v1/sessions/{session_id}/messages", params={"last": 1000})
    assert response.status_code == 200, response.text
    return [m["original"] for m in response.json()["messages"]]


def host_messages(db: AgentDatabase, session_id: str) -> list[dict[str, Any]]:
    rows = db.conn.execute("SELECT event_json FROM transcript_events WHERE session_id = ? ORDER BY seq", (session_id,))
    entries = [json.loads(row[0]) for row in rows]
    return [e["message"] for e in entries if e.get("type") == "message"]


def assert_exactly_once(server: LiveSidecar, db: AgentDatabase, session_id: str) -> None:
    """Every message of the host's transcript is stored once, and nothing else is."""
    stored = Counter(json.dumps(_undated(m), sort_keys=True) for m in stored_originals(server, session_id))
    expected = Counter(json.dumps(_undated(m), sort_keys=True) for m in host_messages(db, session_id))
    assert stored == expected


def _undated(message: dict[str, Any]) -> dict[str, Any]:
    return message


# -- the gap report ------------------------------------------------------------------------------------------


def test_the_gap_report_lists_what_the_host_recorded_and_the_store_lacks_and_writes_nothing(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    old = HostSession(host, "0a7e5c2d-old", "agent:main:telegram:direct:42")
    old.turn("From before the plugin was installed.")
    set_born(host, old.session_id, int(time.time() * 1000) - 86_400_000)
    main = HostSession(host)
    for n in range(2):
        assert sidecar.post("commit-turn", main.turn(f"Committed turn {n}.")).json()["status"] == "committed"
    lost = [main.turn("Outage turn with a tool call.", tool=True), main.turn("Second outage turn.")]
    child = HostSession(host, "c41d-child", "agent:main:subagent:c41d")
    child.turn("CHILD-TASK during the outage.")
    openclaw = sidecar.settings.openclaw_state
    before_files, before_store = file_digests(openclaw), db_fingerprint(sidecar.settings)

    report = _gaps(sidecar, openclaw)
    assert (report.missing, report.not_imported, report.errors) == (4 + 2 + 2, 2, [])
    assert report.agents == {"main": 8}
    by_session = {gap.session_id: gap for gap in report.sessions}
    assert (by_session[SESSION].missing, by_session["c41d-child"].missing) == (6, 2)
    assert not by_session["0a7e5c2d-old"].followed
    stamps = [m["timestamp"] / 1000 for body in lost for m in body["messages"]]
    assert report.first_at is not None and report.first_at == pytest.approx(min(stamps))
    assert report.last_at is not None and report.last_at >= max(stamps)
    assert file_digests(openclaw) == before_files
    assert db_fingerprint(sidecar.settings) == before_store

    narrowed = _gaps(sidecar, openclaw, selection=SessionSelection.of([], ["agent:main:subagent:*"]))
    assert (narrowed.missing, narrowed.sessions_excluded) == (6, 1)


def test_the_gap_report_of_a_store_that_missed_nothing_is_empty(sidecar: LiveSidecar, host: AgentDatabase) -> None:
    main = HostSession(host)
    for n in range(3):
        sidecar.post("commit-turn", main.turn(f"Turn {n}.", tool=n == 1))
    report = _gaps(sidecar, sidecar.settings.openclaw_state)
    assert (report.missing, report.not_imported, report.scanned, report.sessions) == (0, 0, 2 + 4 + 2, [])


def test_the_gap_report_reads_a_legacy_jsonl_store_too(sidecar: LiveSidecar) -> None:
    openclaw = sidecar.settings.openclaw_state
    legacy_sessions(openclaw)  # two sessions the store has never seen (one with an undated message): import's
    before = _gaps(sidecar, openclaw)
    assert (before.missing, before.not_imported, before.errors) == (0, 6, [])
    from openclaw_lossless.transcripts import read_transcripts

    read_transcripts(sidecar.sidecar.ingest, openclaw)
    after = _gaps(sidecar, openclaw)
    assert (after.missing, after.not_imported, after.scanned, after.sessions) == (0, 0, 6, [])


def test_the_gap_report_says_when_there_is_no_openclaw_state(sidecar: LiveSidecar, tmp_path: Path) -> None:
    report = _gaps(sidecar, tmp_path / "nowhere")
    assert report.missing == 0 and report.errors and "OPENCLAW_STATE_DIR" in report.errors[0]


# -- exactly once, whatever the host re-delivers and in whatever order ----------------------------------------


def outage(sidecar: LiveSidecar, host: AgentDatabase, *, start_ms: int = 0) -> tuple[HostSession, list[dict[str, Any]]]:
    """Two turns committed live, then three the host only wrote to its transcript (one with a tool call)."""
    main = HostSession(host, start_ms=start_ms)
    for n in range(2):
        assert sidecar.post("commit-turn", main.turn(f"Live turn {n}.")).json()["stored"] == 2
    if sidecar.sidecar.catch_up.enabled:
        wait_until_caught_up(sidecar, 4)  # the start-up catch-up has run: what follows is the outage
    lost = [main.turn("Read my notes.", tool=True), main.turn("Outage turn four."), main.turn("Outage turn five.")]
    return main, lost


@pytest.mark.parametrize("redelivered", [0, 1, 3])
def test_catch_up_first_then_the_redelivered_turns_store_each_message_once(
    sidecar: LiveSidecar, host: AgentDatabase, redelivered: int
) -> None:
    main, lost = outage(sidecar, host)
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 4 + 2 + 2
    for body in lost[:redelivered]:
        assert sidecar.post("commit-turn", body).json() == {
            "status": "committed",
            "stored": 0,
            "skippedHeartbeat": False,
        }
    assert_exactly_once(sidecar, host, main.session_id)
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 0


@pytest.mark.parametrize("redelivered", [1, 3])
def test_the_redelivered_turns_first_then_catch_up_store_each_message_once(
    sidecar: LiveSidecar, host: AgentDatabase, redelivered: int
) -> None:
    main, lost = outage(sidecar, host)
    for body in lost[:redelivered]:
        assert sidecar.post("commit-turn", body).json()["status"] == "committed"
    caught = sidecar.sidecar.catch_up.catch_up_now("main")
    assert caught == sum(len(body["messages"]) for body in lost[redelivered:])
    assert_exactly_once(sidecar, host, main.session_id)


def test_the_current_turns_user_message_imported_before_its_commit_is_stored_once(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    main, _ = outage(sidecar, host)
    t = main.transcript
    asked = t.user("A question the model is still answering.")
    host.append(main.session_id, asked)
    sidecar.sidecar.catch_up.catch_up_now("main")
    answered = t.entry("message", message=_assistant([{"type": "text", "text": "The answer."}], t.ms))
    host.append(main.session_id, answered)
    body = {"advancementKey": "current", "sessionId": main.session_id, "sessionKey": MAIN_KEY}
    reply = sidecar.post("commit-turn", body | {"messages": [asked["message"], answered["message"]]}).json()
    assert (reply["status"], reply["stored"]) == ("committed", 1)
    assert_exactly_once(sidecar, host, main.session_id)


def test_a_subagent_begun_during_the_outage_is_caught_up_and_older_history_is_left_to_import(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    old = HostSession(host, "0a7e5c2d-old", "agent:main:telegram:direct:42")
    old.turn("From before the plugin was installed.")
    set_born(host, old.session_id, int(time.time() * 1000) - 86_400_000)
    main, _ = outage(sidecar, host)
    child = HostSession(host, "c41d-child", "agent:main:subagent:c41d")
    child.turn("CHILD-TASK: count the lanterns.", tool=True)
    sidecar.sidecar.catch_up.catch_up_now("main")
    assert_exactly_once(sidecar, host, child.session_id)
    response = sidecar.client.get(f"/v1/sessions/{child.session_id}/messages", params={"last": 1})
    assert response.json()["sessionKey"] == "agent:main:subagent:c41d"
    assert sidecar.client.get(f"/v1/sessions/{old.session_id}/messages").status_code == 404
    assert_exactly_once(sidecar, host, main.session_id)


def test_a_brand_new_store_catches_up_nothing_by_itself(sidecar: LiveSidecar, host: AgentDatabase) -> None:
    HostSession(host).turn("History from before the install.")
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 0
    assert sidecar.client.get("/stats").json()["messages"] == 0


@pytest.mark.parametrize("commit_first", [True, False])
def test_undated_messages_of_a_turn_are_stored_once_in_either_order(
    sidecar: LiveSidecar, host: AgentDatabase, commit_first: bool
) -> None:
    """A message without a timestamp is identified by its turn when committed and by its entry when imported:
    the two copies must still be one message, and a repeated "yes" in another turn still its own."""
    main = HostSession(host)
    sidecar.post("commit-turn", main.turn("Live turn."))
    undated = [main.turn("yes", undated=True), main.turn("yes", undated=True)]
    if commit_first:
        for body in undated:
            assert sidecar.post("commit-turn", body).json()["stored"] == 2
    sidecar.sidecar.catch_up.catch_up_now("main")
    for body in undated:
        assert sidecar.post("commit-turn", body).json()["stored"] == 0
    assert len(stored_originals(sidecar, main.session_id)) == 2 + 4
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 0
    assert len(stored_originals(sidecar, main.session_id)) == 2 + 4


def test_a_compaction_the_hook_recorded_is_not_recorded_again_by_catch_up_even_with_a_secret_in_it(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    main, _ = outage(sidecar, host)
    summary = "## Decisions\nDeploy with ghp_R4nd0mT0k3nV4lu3F0rG1tHubAcc3ss0K on Fridays."
    first_kept = {"id": "entry-kept"}
    host.append(main.session_id, main.transcript.compaction(summary, first_kept))
    compact = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "tokensBefore": 9000, "summary": summary}
    assert sidecar.post("compact", compact).status_code == 200
    sidecar.sidecar.catch_up.catch_up_now("main")
    stats = sidecar.client.get("/stats").json()
    assert stats["compactions"] == 1
    stored = sidecar.sidecar.queries.compaction(1)
    assert "ghp_R4nd0m" not in json.dumps(asdict(stored))
    assert_exactly_once(sidecar, host, main.session_id)


def test_a_heartbeat_turn_committed_without_its_messages_stays_out_of_catch_up_and_the_gap_report(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    main, _ = outage(sidecar, host)
    beat = main.turn("Read HEARTBEAT.md if it exists. If nothing needs attention, reply HEARTBEAT_OK.")
    assert sidecar.post("commit-turn", beat | {"isHeartbeat": True}).json()["skippedHeartbeat"] is True
    sidecar.sidecar.catch_up.catch_up_now("main")
    stored = stored_originals(sidecar, main.session_id)
    assert not [m for m in stored if m in beat["messages"]]
    assert len(stored) == len(host_messages(host, main.session_id)) - 2
    assert _gaps(sidecar, sidecar.settings.openclaw_state).missing == 0


def test_a_heartbeat_ingested_without_a_durable_turn_stays_out_too(sidecar: LiveSidecar, host: AgentDatabase) -> None:
    main, _ = outage(sidecar, host)
    beat = main.turn("HEARTBEAT")
    body = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": beat["messages"], "isHeartbeat": True}
    assert sidecar.post("after-turn", body).json() == {"ingestedCount": 0}
    sidecar.sidecar.catch_up.catch_up_now("main")
    assert not [m for m in stored_originals(sidecar, main.session_id) if m in beat["messages"]]


# -- session selection ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("include", "exclude", "key", "captured"),
    [
        ([], [], "agent:main:main", True),
        ([], ["agent:*:cron:*"], "agent:ops:cron:nightly", False),
        ([], ["agent:*:cron:*"], "agent:ops:main", True),
        ([], ["agent:main:*"], "agent:main:telegram:group:-100:topic:7", False),  # '*' crosses ':'
        ([], ["agent:main:group:?"], "agent:main:group:7", False),
        ([], ["agent:main:group:?"], "agent:main:group:77", True),
        ([], ["agent:main:[gc]*"], "agent:main:cron:x", False),
        ([], ["agent:main:[!g]*"], "agent:main:group:x", True),
        ([], ["Agent:main:*"], "agent:main:main", True),  # case-sensitive
        (["agent:main:*"], [], "agent:ops:main", False),
        (["agent:main:*"], ["agent:main:cron:*"], "agent:main:cron:x", False),  # exclude wins
        (["agent:main:*"], ["agent:main:cron:*"], "agent:main:main", True),
        (["s-*"], [], None, True),  # no key: the session id is matched
        (["agent:*"], [], None, False),
    ],
)
def test_session_selection_follows_the_documented_glob_rule(
    include: list[str], exclude: list[str], key: str | None, captured: bool
) -> None:
    assert SessionSelection.of(include, exclude).captures("s-1", key) is captured


def test_the_sidecar_matches_every_case_the_plugin_is_tested_with() -> None:
    """The plugin's matcher (JavaScript) and this one agree on the shared cases: one rule, two implementations."""
    fixture = Path(__file__).parents[1] / "plugin" / "test" / "fixtures" / "glob-cases.json"
    if not fixture.exists():
        pytest.skip("the plugin's glob cases are not there")
    cases = json.loads(fixture.read_text())["cases"]
    assert cases
    for name, pattern, expected in (case for case in cases if case[1].strip()):  # blank patterns are dropped
        assert SessionSelection.of([], [pattern]).captures("no-key", name) is not expected, (name, pattern)
        assert SessionSelection.of([pattern], []).captures("no-key", name) is expected, (name, pattern)


def test_patterns_come_comma_separated_from_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("LOSSLESS_EXCLUDE_SESSIONS", " agent:*:cron:* ,agent:main:group:*,, ")
    monkeypatch.setenv("LOSSLESS_INCLUDE_SESSIONS", "")
    settings = make_settings(tmp_path / "state")
    assert (settings.exclude_sessions, settings.include_sessions) == (["agent:*:cron:*", "agent:main:group:*"], [])


def test_an_excluded_session_is_neither_stored_nor_recalled_nor_imported(tmp_path: Path) -> None:
    cron = "agent:main:cron:nightly"
    settings = make_settings(tmp_path / "state", exclude_sessions=["agent:*:cron:*"])
    with live_sidecar(settings, HashEmbedder()) as server:
        database = AgentDatabase(settings.openclaw_state)
        try:
            kept = HostSession(database)
            assert server.post("commit-turn", kept.turn("The vault moved to rack 4.")).json()["stored"] == 2
            hidden = HostSession(database, "9f1e-cron", cron)
            body = hidden.turn("Nightly report: the vault moved to rack 9.")
            assert server.post("commit-turn", body).json() == {
                "status": "committed",
                "stored": 0,
                "skippedHeartbeat": False,
            }
            ingest = {"sessionId": hidden.session_id, "sessionKey": cron, "message": body["messages"][0]}
            assert server.post("ingest", ingest).json() == {"ingested": False}
            boot = server.post("bootstrap", {"sessionId": hidden.session_id, "sessionKey": cron}).json()
            assert (boot["reason"], boot["importedMessages"]) == ("excluded", 0)
            server.wait_for_backlog()
            ask = {"sessionId": hidden.session_id, "sessionKey": cron, "messages": [], "prompt": "Where is the vault?"}
            answer = server.post("assemble", ask).json()
            assert (answer["systemPromptAddition"], answer["recallSkipped"]) == ("", "excluded_session")
            assert (
                "rack 4"
                in server.post("assemble", ask | {"sessionId": "other", "sessionKey": MAIN_KEY}).json()[
                    "systemPromptAddition"
                ]
            )
            assert server.sidecar.catch_up.catch_up_now("main") == 0
            from openclaw_lossless.transcripts import read_transcripts

            report = read_transcripts(server.sidecar.ingest, settings.openclaw_state)
            assert (report.messages_imported, report.sessions_excluded) == (0, 1)
            assert server.client.get(f"/v1/sessions/{hidden.session_id}/messages").status_code == 404
            assert server.client.get("/stats").json()["messages"] == 2
        finally:
            database.close()


# -- the running sidecar catches up by itself -----------------------------------------------------------------


def wait_until_caught_up(server: LiveSidecar, expected_messages: int, timeout: float = 30) -> dict[str, Any]:
    """Poll /stats until the store holds the expected count and catch-up has nothing queued (no timing asserts)."""
    deadline = time.monotonic() + timeout
    while True:
        stats: dict[str, Any] = server.client.get("/stats").json()
        catch_up = stats["catchUp"]
        if stats["messages"] >= expected_messages and catch_up["pending"] == 0 and catch_up["state"] == "idle":
            return stats
        if time.monotonic() > deadline:
            raise AssertionError(f"not caught up: {stats['messages']} of {expected_messages} messages, {catch_up}")
        time.sleep(0.1)


@pytest.mark.parametrize("host_calls", [True, False], ids=["redelivered-and-assembled", "no-hook-at-all"])
def test_after_an_outage_the_restarted_sidecar_stores_every_host_message_exactly_once(
    tmp_path: Path, host_calls: bool
) -> None:
    """Two turns live; the sidecar goes down; the host answers three turns (a tool call, a subagent) that only
    its transcripts hold; the sidecar comes back, and the host re-delivers the first and assembles the next
    turn, or sends nothing at all (the start-up catch-up alone)."""
    settings = make_settings(tmp_path / "state")
    database = AgentDatabase(settings.openclaw_state)
    try:
        main = HostSession(database)
        with live_sidecar(settings, HashEmbedder()) as server:
            for n in range(2):
                assert server.post("commit-turn", main.turn(f"Live turn {n}.")).json()["stored"] == 2
            assert server.client.get("/healthz").json()["catchUp"]["state"] in ("idle", "running")
        lost = [main.turn("Read my notes.", tool=True), main.turn("Outage turn four.")]
        child = HostSession(database, "c41d-child", "agent:main:subagent:c41d")
        child.turn("CHILD-TASK: count the lanterns.", tool=True)
        lost.append(main.turn("Outage turn five."))
        with live_sidecar(settings, HashEmbedder()) as server:
            history = host_messages(database, main.session_id)
            if host_calls:
                assert server.post("commit-turn", lost[0]).json()["status"] == "committed"  # its one re-delivery
                ask = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": history, "prompt": "Next?"}
                assert server.post("assemble", ask).status_code == 200
            stats = wait_until_caught_up(server, len(history) + 4)
            assert_exactly_once(server, database, main.session_id)
            assert_exactly_once(server, database, child.session_id)
            assert stats["messages"] == len(history) + 4
            assert stats["catchUp"]["totalImported"] >= 1 and stats["catchUp"]["lastError"] is None
    finally:
        database.close()


def test_a_gap_in_what_the_host_assembles_is_caught_up_without_a_restart(running: LiveSidecar) -> None:
    """The sidecar stayed up but the turns never reached it (the plugin could not connect): the next assemble
    shows host messages the store lacks, and the store catches up by itself."""
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main, _ = outage(running, host, start_ms=int(time.time() * 1000) - 20_000)  # not late: only the gap tells
        history = host_messages(host, main.session_id)
        ask = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": history, "prompt": "Next?"}
        assert running.post("assemble", ask).status_code == 200
        wait_until_caught_up(running, len(history))
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_two_tool_results_alike_in_text_and_time_are_two_messages_to_catch_up(running: LiveSidecar) -> None:
    """Parallel tool calls answered in the same millisecond with the same text share a window key: the store
    holding one of them must not hide that the other is missing."""
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 20_000)
        running.post("commit-turn", main.turn("Live turn."))
        wait_until_caught_up(running, 2)
        t = main.transcript
        calls = [{"type": "toolCall", "id": f"c{n}", "name": "read", "arguments": {"path": f"{n}.md"}} for n in (1, 2)]
        asked, called = t.user("Read both files."), t.entry("message", message=_assistant(calls, t.ms, "toolUse"))
        stamp = t.ms + 5000
        results = [
            t.entry(
                "message",
                message={
                    "role": "toolResult",
                    "toolCallId": f"c{n}",
                    "toolName": "read",
                    "content": [{"type": "text", "text": "file not found"}],
                    "isError": True,
                    "timestamp": stamp,
                },
            )
            for n in (1, 2)
        ]
        host.append(main.session_id, asked, called, *results)
        partial = [asked["message"], called["message"], results[0]["message"]]  # the store got all but one
        body = {"advancementKey": "partial", "sessionId": main.session_id, "sessionKey": MAIN_KEY}
        assert running.post("commit-turn", body | {"messages": partial}).json()["stored"] == 3
        history = host_messages(host, main.session_id)
        ask = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": history, "prompt": "Next?"}
        running.post("assemble", ask)
        wait_until_caught_up(running, len(history))
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_a_late_redelivered_turn_alone_brings_in_the_turns_after_it(running: LiveSidecar) -> None:
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 3 * 3_600_000)  # the outage was hours ago
        running.post("commit-turn", main.turn("Live turn."))
        wait_until_caught_up(running, 2)
        lost = [main.turn("Outage turn two."), main.turn("Outage turn three.")]
        assert running.post("commit-turn", lost[0]).json()["status"] == "committed"
        wait_until_caught_up(running, 6)
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_a_turn_committed_out_of_order_brings_in_the_turn_between(running: LiveSidecar) -> None:
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 20_000)  # recent: not a late delivery
        running.post("commit-turn", main.turn("Turn one."))
        wait_until_caught_up(running, 2)  # the start-up catch-up has run
        second, _, fourth = main.turn("Turn two."), main.turn("Turn three."), main.turn("Turn four.")
        assert running.post("commit-turn", fourth).json()["stored"] == 2
        assert running.post("commit-turn", second).json()["stored"] == 2  # older than what is stored
        wait_until_caught_up(running, 8)
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_a_known_session_seen_again_after_a_quiet_spell_is_caught_up_at_bootstrap(running: LiveSidecar) -> None:
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main = HostSession(host, start_ms=int(time.time() * 1000) - 3_600_000)
        running.post("commit-turn", main.turn("Turn one, an hour ago."))
        wait_until_caught_up(running, 2)
        main.turn("Never delivered.")
        boot = running.post("bootstrap", {"sessionId": main.session_id, "sessionKey": MAIN_KEY}).json()
        assert boot["reason"] == "known"
        wait_until_caught_up(running, 4)
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_a_host_message_no_catch_up_can_bring_in_does_not_make_every_turn_import(running: LiveSidecar) -> None:
    """The host's history may hold a message its transcript does not keep as one: after one catch-up has
    tried, that message is no longer a gap, so later turns do not each run an import that cannot help."""
    host = AgentDatabase(running.settings.openclaw_state)
    try:
        main, _ = outage(running, host, start_ms=int(time.time() * 1000) - 20_000)
        made_up = {"role": "custom", "content": "a note the host keeps outside the transcript", "timestamp": 1}
        history = [*host_messages(host, main.session_id), made_up]
        ask = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": history, "prompt": "Next?"}
        running.post("assemble", ask)
        runs = wait_until_caught_up(running, len(history) - 1)["catchUp"]["runs"]
        for _ in range(3):
            running.post("assemble", ask)
            assert wait_until_caught_up(running, len(history) - 1)["catchUp"]["runs"] == runs
        assert_exactly_once(running, host, main.session_id)
    finally:
        host.close()


def test_catch_up_can_be_turned_off(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", catch_up=False)
    database = AgentDatabase(settings.openclaw_state)
    try:
        main = HostSession(database)
        with live_sidecar(settings, HashEmbedder()) as server:
            server.post("commit-turn", main.turn("Live turn."))
            main.turn("Never delivered.")
            history = host_messages(database, main.session_id)
            ask = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "messages": history, "prompt": "Next?"}
            server.post("assemble", ask)
            view = server.client.get("/stats").json()["catchUp"]
            assert (view["state"], view["pending"], view["runs"]) == ("off", 0, 0)
            assert server.client.get("/stats").json()["messages"] == 2
    finally:
        database.close()


# -- what is not conversation, and identity across redaction rules -------------------------------------------


def _host_reply(t: Transcript, text: str, model: str) -> dict[str, Any]:
    """An assistant row the host writes itself (``provider: "openclaw"``), as it records a command's answer."""
    message = _assistant([{"type": "text", "text": text}], t.ms) | {"provider": "openclaw", "model": model}
    entry: dict[str, Any] = t.entry("message", message=message | {"api": "openai-responses", "idempotencyKey": "k"})
    return entry


def test_lossless_command_exchanges_are_neither_stored_nor_counted_missing(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    """The host writes ``/lossless`` commands and their answers to the transcript but never commits them; the
    ``search`` answer quotes stored history, so storing it would make recall feed on its own output."""
    main, _ = outage(sidecar, host)
    t = main.transcript
    rows = [
        t.user("/lossless"),
        _host_reply(t, "lossless: on, 4 messages stored for agent main", "gateway-injected"),
        t.user("  /lossless search vault rack\n"),
        _host_reply(t, "1 hit: [msg:3] the vault moved to rack 4", "gateway-injected"),
        _host_reply(t, "Answer mirrored to the channel.", "delivery-mirror"),
        t.user("/losslessness is not a command"),
    ]
    host.append(main.session_id, *rows)
    before = _gaps(sidecar, sidecar.settings.openclaw_state)
    assert before.missing == 4 + 2 + 2 + 1  # the outage's three turns, and the one user row that is conversation
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 4 + 2 + 2 + 1
    stored = json.dumps(stored_originals(sidecar, main.session_id))
    assert "/losslessness" in stored
    assert "/lossless search" not in stored and "rack 4" not in stored and "mirrored" not in stored
    assert "lossless: on" not in stored and '"/lossless"' not in stored
    assert _gaps(sidecar, sidecar.settings.openclaw_state).missing == 0


def test_a_message_stored_before_the_redaction_rules_changed_is_not_stored_again_by_catch_up(tmp_path: Path) -> None:
    """Stored live by one version, read back from the transcript by a later one whose rules redact more (its
    cursor behind, here: never imported): the same host message, so stored once."""
    database = AgentDatabase((tmp_path / "state").parent / "openclaw-state")
    try:
        main = HostSession(database)
        spawned = main.turn("Spawn a helper for rack 4.", tool=True)
        child_key = {"childSessionKey": "agent:main:subagent:c41d", "status": "accepted"}
        spawned["messages"][2]["details"] = child_key  # the tool result, as sessions_spawn answers
        database.conn.execute(
            "UPDATE transcript_events SET event_json = json_set(event_json, '$.message.details', json(?))"
            " WHERE session_id = ? AND json_extract(event_json, '$.message.role') = 'toolResult'",
            (json.dumps(child_key), main.session_id),
        )
        with live_sidecar(make_settings(tmp_path / "state", catch_up=False), HashEmbedder()) as server:
            assert server.post("commit-turn", spawned).json()["stored"] == 4
            assert server.post("commit-turn", main.turn("yes")).json()["stored"] == 2
            main.turn("yes")  # a repeated "yes" in a later turn, never delivered: its own message
        stricter = ["agent:main:subagent:[a-z0-9]+", "rack \\d+", "notes for turn \\d+"]
        settings = make_settings(tmp_path / "state", catch_up=False, redact_patterns=stricter)
        with live_sidecar(settings, HashEmbedder()) as server:
            assert server.sidecar.catch_up.catch_up_now("main") == 2
            stored = stored_originals(server, main.session_id)
            assert len(stored) == len(host_messages(database, main.session_id)) == 4 + 2 + 2
            assert "REDACTED:custom" not in json.dumps(stored)  # the first version's copies stay, not the second's
            assert _gaps(server, settings.openclaw_state).missing == 0
    finally:
        database.close()


# -- what the host records and never commits -------------------------------------------------------------------


def announce(main: HostSession) -> str:
    """The parent's announce turn after a child finished: the host records its reply, never commits it."""
    text = f"I delegated that to a child session; its report will follow ({uuid.uuid4()})."
    t = main.transcript
    main.db.append(main.session_id, t.entry("message", message=_assistant([{"type": "text", "text": text}], t.ms)))
    return text


def copies(server: LiveSidecar, session_id: str, text: str) -> int:
    return sum(text in json.dumps(m) for m in stored_originals(server, session_id))


def wait_for_copy(server: LiveSidecar, session_id: str, text: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while copies(server, session_id, text) == 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"not caught up: {server.client.get('/stats').json()['catchUp']}")
        time.sleep(0.1)


def test_the_periodic_check_stores_what_the_host_never_commits_once_the_agent_is_idle(
    sidecar: LiveSidecar, host: AgentDatabase, monkeypatch: pytest.MonkeyPatch
) -> None:
    main = HostSession(host)
    assert sidecar.post("commit-turn", main.turn("Delegate the lantern count.")).json()["stored"] == 2
    text = announce(main)
    check = sidecar.sidecar.catch_up
    monkeypatch.setattr(catchup, "IDLE_S", 3600.0)
    assert check.poll() == 0  # a turn just ended: a heartbeat's messages could be read before its commit
    assert copies(sidecar, main.session_id, text) == 0
    monkeypatch.setattr(catchup, "IDLE_S", 0.0)
    monkeypatch.setattr(catchup, "SETTLE_S", 3600.0)  # every file "just written": the host may be mid-write
    assert check.poll() == 1
    runs = check.runs
    assert check.poll() == 0 and check.runs == runs + 1  # so it is read again: a WAL frame published late counts
    monkeypatch.setattr(catchup, "SETTLE_S", 0.0)
    check.poll()
    runs = check.runs
    assert check.poll() == 0 and check.runs == runs  # nothing changed on the host's side: no import at all
    assert_exactly_once(sidecar, host, main.session_id)


def test_the_running_sidecar_checks_by_itself_while_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catchup, "IDLE_S", 0.0)
    settings = make_settings(tmp_path / "state", catch_up_interval_s=0.2)
    database = AgentDatabase(settings.openclaw_state)
    try:
        main = HostSession(database, start_ms=int(time.time() * 1000) - 20_000)  # not late: only the check tells
        with live_sidecar(settings, HashEmbedder()) as server:
            assert server.post("commit-turn", main.turn("Delegate the lantern count.")).json()["stored"] == 2
            wait_until_caught_up(server, 2)  # the start-up catch-up has run: what follows only the check sees
            text = announce(main)
            wait_for_copy(server, main.session_id, text)
            assert_exactly_once(server, database, main.session_id)
    finally:
        database.close()


def test_a_subagent_ending_brings_in_the_parents_announce_turn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No periodic check, no next turn: the end of the child alone makes the catch-up look shortly after."""
    monkeypatch.setattr(catchup, "SUBAGENT_DELAY_S", 0.2)
    settings = make_settings(tmp_path / "state", catch_up_interval_s=0)
    database = AgentDatabase(settings.openclaw_state)
    try:
        main = HostSession(database, start_ms=int(time.time() * 1000) - 20_000)  # not late: only the check tells
        child_key = "agent:main:subagent:c41d"
        with live_sidecar(settings, HashEmbedder()) as server:
            assert server.post("commit-turn", main.turn("Delegate the lantern count.")).json()["stored"] == 2
            wait_until_caught_up(server, 2)
            spawn = {"parentSessionKey": MAIN_KEY, "childSessionKey": child_key}
            assert server.post("subagent-spawn", spawn).status_code == 200
            child = HostSession(database, "c41d-child", child_key, start_ms=int(time.time() * 1000) - 10_000)
            assert server.post("commit-turn", child.turn("CHILD-TASK: count the lanterns.")).json()["stored"] == 2
            text = announce(main)
            ended = server.post("subagent-ended", {"childSessionKey": child_key, "reason": "completed"})
            assert ended.json()["ended"] is True
            wait_for_copy(server, main.session_id, text)
            assert copies(server, main.session_id, text) == 1
    finally:
        database.close()


def test_a_compaction_catch_up_imported_before_the_hook_arrived_is_recorded_once(
    sidecar: LiveSidecar, host: AgentDatabase
) -> None:
    """OpenClaw writes the compaction entry, a catch-up runs, then the ``compact`` hook arrives: one compaction,
    one pre-compaction snapshot, and the hook's answer names it."""
    main, _ = outage(sidecar, host)
    summary = "## Decisions\nThe vault moved to rack 4; deploy on Fridays."
    host.append(main.session_id, main.transcript.compaction(summary, {"id": "entry-kept"}))
    sidecar.sidecar.catch_up.catch_up_now("main")
    assert sidecar.client.get("/stats").json()["compactions"] == 1
    compact = {"sessionId": main.session_id, "sessionKey": MAIN_KEY, "tokensBefore": 9000, "summary": summary}
    answer = sidecar.post("compact", compact | {"tokensAfter": 1200, "ok": True, "reason": "overflow"}).json()
    assert (answer["compactionId"], answer["status"], answer["snapshot"]) == (1, "compacted", "pre-compaction-1")
    assert sidecar.client.get("/stats").json()["compactions"] == 1
    automatic = [s for s in sidecar.client.get("/v1/snapshots").json()["snapshots"] if s["automatic"]]
    assert [s["name"] for s in automatic] == ["pre-compaction-1"]
    again = sidecar.post("compact", compact).json()  # a second compaction with the same summary is its own
    assert again["compactionId"] == 2
    sidecar.sidecar.catch_up.catch_up_now("main")
    assert sidecar.client.get("/stats").json()["compactions"] == 2
