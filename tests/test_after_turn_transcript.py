"""``afterTurn`` on a host without durable turns that keeps JSONL transcripts (OpenClaw 2026.7.33+).

Such a host hands ``afterTurn`` the run's in-memory copies of the turn, whose user message differs from the one
its transcript file holds (text blocks and a later timestamp instead of a string and the queued one, as the real
2026.7.35 gateway does). The sidecar stores the turn from the file, so a later catch-up of the same file finds
every message already there: each is stored exactly once, in the file's form.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings
from tests.test_history_import import Transcript, messages_of, write_jsonl

SESSION = "9c0f3d1e-7a52-4b8e-a1f3-2d7c5e8b9a10"
KEY = "agent:main:main"
T0 = 1_796_000_000_000


@pytest.fixture
def sidecar(tmp_path: Path) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path / "state", catch_up=False), HashEmbedder()) as server:
        yield server


class JsonlHost:
    """One session's transcript file as the 2026.7 maintenance line writes it, turn by turn."""

    def __init__(self, state: Path) -> None:
        self.sessions = state / "agents" / "main" / "sessions"
        self.transcript = Transcript(SESSION, T0)
        self.entries: list[dict[str, Any]] = [self.transcript.header(), *self.transcript.settings()]
        self.sessions.mkdir(parents=True, exist_ok=True)
        (self.sessions / "sessions.json").write_text(json.dumps({KEY: {"sessionId": SESSION}}))

    def turn(self, text: str) -> list[dict[str, Any]]:
        """Append a turn to the file; return what afterTurn gets for it (the run's in-memory copies)."""
        user, answer = self.transcript.user(text), self.transcript.assistant(f"Noted: {text}")
        self.entries += [user, answer]
        write_jsonl(self.sessions / f"{SESSION}.jsonl", self.entries)
        live_user = {
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "timestamp": user["message"]["timestamp"] + 7000,
        }
        return [live_user, answer["message"]]

    def messages(self) -> list[dict[str, Any]]:
        return messages_of(self.entries)


def stored(server: LiveSidecar) -> list[dict[str, Any]]:
    response = server.client.get(f"/v1/sessions/{SESSION}/messages", params={"last": 1000})
    assert response.status_code == 200, response.text
    return [m["original"] for m in response.json()["messages"]]


def after_turn(server: LiveSidecar, messages: list[dict[str, Any]]) -> int:
    body = {
        "sessionId": SESSION,
        "sessionKey": KEY,
        "sessionFile": "x.jsonl",
        "messages": messages,
        "prePromptMessageCount": 0,
    }
    response = server.post("after-turn", body)
    assert response.status_code == 200, response.text
    count: int = response.json()["ingestedCount"]
    return count


def test_turns_are_stored_from_the_transcript_once_whatever_catch_up_reads_later(sidecar: LiveSidecar) -> None:
    host = JsonlHost(sidecar.settings.openclaw_state)
    before = {p: p.read_bytes() for p in host.sessions.iterdir()}
    assert after_turn(sidecar, host.turn("The boiler key hangs behind the blue door.")) == 2
    assert after_turn(sidecar, host.turn("Filler: the cat likes the sofa.")) == 2
    assert stored(sidecar) == host.messages()  # the file's copies, in order, each once
    # The same turn again (a retry), and the catch-up that reads the same file: nothing more.
    assert after_turn(sidecar, host.turn("Last one: lunch is at noon.")) == 2
    assert after_turn(sidecar, host.messages()[-2:]) == 0
    assert sidecar.sidecar.catch_up.catch_up_now("main") == 0
    assert stored(sidecar) == host.messages()
    assert {p: p.read_bytes() for p in before} == before  # read only


def test_without_a_transcript_file_the_messages_as_given_are_stored(sidecar: LiveSidecar) -> None:
    live = [{"role": "user", "content": "No file for this one.", "timestamp": T0}]
    assert after_turn(sidecar, live) == 1
    assert after_turn(sidecar, live) == 0
    assert stored(sidecar) == live
