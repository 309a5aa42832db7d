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
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.history.gaps import find_gaps
from openclaw_lossless.selection import SessionSelection
from openclaw_lossless.store.connection import open_connection
from tests.helpers import HashEmbedder, LiveSidecar, db_fingerprint, live_sidecar, make_settings
from tests.test_history_import import AgentDatabase, Transcript, file_digests

MAIN_KEY = "agent:main:main"
SESSION = "5b1c0f8e-2f0e-4d53-9a55-0c3f8b7d6e21"


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
        entries.append(t.entry("message", message=_assistant([{"type": "text", "text": f"Answer {self.turns}."}], t.ms)))
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
    before_files, before_store = file_digests(openclaw), db_fingerprint(sidecar.settings.database_path)

    with closing(open_connection(sidecar.settings.database_path, readonly=True)) as conn:
        report = find_gaps(conn, openclaw)
    assert (report.missing, report.not_imported, report.errors) == (4 + 2 + 2, 2, [])
    assert report.agents == {"main": 8}
    by_session = {gap.session_id: gap for gap in report.sessions}
    assert (by_session[SESSION].missing, by_session["c41d-child"].missing) == (6, 2)
    assert not by_session["0a7e5c2d-old"].followed
    stamps = [m["timestamp"] / 1000 for body in lost for m in body["messages"]]
    assert report.first_at is not None and report.first_at == pytest.approx(min(stamps))
    assert report.last_at is not None and report.last_at >= max(stamps)
    assert file_digests(openclaw) == before_files
    assert db_fingerprint(sidecar.settings.database_path) == before_store

    with closing(open_connection(sidecar.settings.database_path, readonly=True)) as conn:
        narrowed = find_gaps(conn, openclaw, selection=SessionSelection.of([], ["agent:main:subagent:*"]))
    assert (narrowed.missing, narrowed.sessions_excluded) == (6, 1)


def test_the_gap_report_of_a_store_that_missed_nothing_is_empty(sidecar: LiveSidecar, host: AgentDatabase) -> None:
    main = HostSession(host)
    for n in range(3):
        sidecar.post("commit-turn", main.turn(f"Turn {n}.", tool=n == 1))
    with closing(open_connection(sidecar.settings.database_path, readonly=True)) as conn:
        report = find_gaps(conn, sidecar.settings.openclaw_state)
    assert (report.missing, report.not_imported, report.scanned, report.sessions) == (0, 0, 2 + 4 + 2, [])


def test_the_gap_report_says_when_there_is_no_openclaw_state(sidecar: LiveSidecar, tmp_path: Path) -> None:
    with closing(open_connection(sidecar.settings.database_path, readonly=True)) as conn:
        report = find_gaps(conn, tmp_path / "nowhere")
    assert report.missing == 0 and report.errors and "OPENCLAW_STATE_DIR" in report.errors[0]
