"""Claude Code's session transcripts as agent ``claude-code``: imported once, incrementally, and searchable.

The transcripts are written here in Claude Code's documented JSONL format (one entry a line: ``type``,
``message`` {role, content}, ``uuid``, ``parentUuid``, ``sessionId``, ``timestamp``, ``cwd``); the store is the
real one, through the CLI (``import --claude-code``) and the running sidecar (``serve --claude-code``).
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.transcripts import catchup
from tests.helpers import HashEmbedder, live_sidecar, make_settings, run_cli, run_cli_json

SESSION = "3f2b8a61-9c4d-4e0f-8a7b-2d5c6e1f0a93"
CWD = "/home/ada/lighthouse"


class ClaudeSession:
    """One Claude Code session file, appended to line by line as Claude Code writes it."""

    def __init__(self, projects: Path, session_id: str = SESSION) -> None:
        self.path = projects / "-home-ada-lighthouse" / f"{session_id}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.session_id = session_id
        self.last: str | None = None
        self.ms = int(time.time() * 1000) - 600_000

    def line(self, kind: str, content: Any, **extra: Any) -> str:
        self.ms += 1000
        entry: dict[str, Any] = {
            "parentUuid": self.last,
            "isSidechain": False,
            "userType": "external",
            "cwd": CWD,
            "sessionId": self.session_id,
            "version": "2.0.14",
            "type": kind,
            "message": {"role": kind, "content": content, **extra},
            "uuid": str(uuid.uuid4()),
            "timestamp": datetime.fromtimestamp(self.ms / 1000, UTC).isoformat().replace("+00:00", "Z"),
        }
        self.last = entry["uuid"]
        return json.dumps(entry) + "\n"

    def append(self, *lines: str) -> None:
        with self.path.open("a") as file:
            file.write("".join(lines))


def first_session(session: ClaudeSession) -> list[str]:
    """A user question, the assistant thinking and calling a tool, the tool's result, the answer."""
    return [
        json.dumps({"type": "summary", "summary": "Lighthouse rota", "leafUuid": str(uuid.uuid4())}) + "\n",
        session.line("user", "Which keeper has the night shift on Tuesdays?"),
        session.line(
            "assistant",
            [
                {"type": "thinking", "thinking": "Check the rota file.", "signature": "x"},
                {"type": "tool_use", "id": "toolu_01", "name": "Read", "input": {"file_path": "rota.md"}},
            ],
            id="msg_01",
            model="claude-sonnet-4-5",
            stop_reason="tool_use",
        ),
        session.line(
            "user", [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "Tuesday night: Morwenna Pike"}]
        ),
        session.line(
            "assistant",
            [{"type": "text", "text": "Morwenna Pike keeps the Tuesday night watch."}],
            id="msg_02",
            model="claude-sonnet-4-5",
            stop_reason="end_turn",
        ),
    ]


def recovered(capsys: pytest.CaptureFixture[str], state: Path) -> dict[str, Any]:
    found: dict[str, Any] = run_cli_json(capsys, state, "recover", "--session", SESSION, "--last", "100")
    return found


def stored(capsys: pytest.CaptureFixture[str], state: Path) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = recovered(capsys, state)["messages"]
    return messages


@pytest.fixture
def projects(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "claude" / "projects"
    monkeypatch.setenv("LOSSLESS_CLAUDE_CODE_DIR", str(path))
    return path


def test_import_brings_in_a_claude_code_session_once_as_agent_claude_code(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, projects: Path
) -> None:
    session = ClaudeSession(projects)
    session.append(*first_session(session))
    state = tmp_path / "state"
    report = run_cli_json(capsys, state, "import", "--claude-code")
    assert (report["messages_imported"], report["errors"]) == (4, 0)
    messages = stored(capsys, state)
    assert [m["role"] for m in messages] == ["user", "assistant", "toolResult", "assistant"]
    assert recovered(capsys, state)["agentId"] == "claude-code"
    call = messages[1]["original"]["content"][-1]
    assert call == {"type": "toolCall", "id": "toolu_01", "name": "Read", "arguments": {"file_path": "rota.md"}}
    assert messages[2]["original"]["toolCallId"] == "toolu_01"
    hits = run_cli_json(
        capsys, state, "search", "Tuesday night watch keeper", "--agent", "claude-code", "--mode", "keyword"
    )
    assert any("Morwenna Pike" in hit["text"] for hit in hits["hits"])
    again = run_cli_json(capsys, state, "import", "--claude-code")
    assert again["messages_imported"] == 0
    assert len(stored(capsys, state)) == 4


def test_appended_lines_are_taken_once_and_a_half_written_line_only_when_complete(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, projects: Path
) -> None:
    session = ClaudeSession(projects)
    session.append(*first_session(session))
    state = tmp_path / "state"
    run_cli_json(capsys, state, "import", "--claude-code")
    question = session.line("user", "And on Wednesdays?")
    answer = session.line("assistant", [{"type": "text", "text": "Wednesdays belong to Tobias Quill."}])
    session.append(question, answer[:40])  # Claude Code is mid-write
    assert run_cli_json(capsys, state, "import", "--claude-code")["messages_imported"] == 1
    session.append(answer[40:])
    assert run_cli_json(capsys, state, "import", "--claude-code")["messages_imported"] == 1
    texts = [json.dumps(m["original"]) for m in stored(capsys, state)]
    assert len(texts) == 6 and sum("Tobias Quill" in text for text in texts) == 1


def test_lines_without_conversation_are_not_stored_and_a_bad_line_is_counted(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, projects: Path
) -> None:
    session = ClaudeSession(projects)
    meta = json.loads(session.line("user", "<local-command-caveat>Caveat</local-command-caveat>"))
    session.append(
        json.dumps(meta | {"isMeta": True}) + "\n",
        json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}) + "\n",
        "{not json\n",
        session.line("user", "Log the fog horn test."),
    )
    report = run_cli_json(capsys, tmp_path / "state", "import", "--claude-code")
    assert (report["messages_imported"], report["skipped_malformed"]) == (1, 1)


def test_import_without_a_claude_code_dir_says_where_it_looked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, projects: Path
) -> None:
    code, out, err = run_cli(capsys, tmp_path / "state", "import", "--claude-code")
    assert code == 2 and out == ""
    assert str(projects) in err and "LOSSLESS_CLAUDE_CODE_DIR" in err and "Traceback" not in err
    assert not (tmp_path / "state").exists() or not any((tmp_path / "state").glob("*.sqlite"))


def test_the_watching_sidecar_stores_claude_code_sessions_as_they_grow(
    tmp_path: Path, projects: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(catchup, "SETTLE_S", 0.0)
    session = ClaudeSession(projects)
    session.append(*first_session(session))
    settings = make_settings(tmp_path / "state", claude_code=True, claude_code_dir=projects, watch_interval_s=0.1)
    with live_sidecar(settings, HashEmbedder()) as server:
        assert server.client.get("/healthz").json()["catchUp"]["watching"] == ["claude-code"]
        wait_for(server, 4)
        session.append(session.line("user", "Who relieves her at dawn?"))
        wait_for(server, 5)
        hits = server.client.get("/v1/search", params={"q": "relieves dawn", "mode": "keyword"}).json()["hits"]
        assert [hit["agentId"] for hit in hits if "dawn" in hit["text"]] == ["claude-code"]


def wait_for(server: Any, count: int) -> None:
    deadline = time.monotonic() + 30
    while True:
        response = server.client.get(f"/v1/sessions/{SESSION}/messages", params={"last": 100})
        if response.status_code == 200 and len(response.json()["messages"]) >= count:
            return
        if time.monotonic() > deadline:
            raise AssertionError(server.client.get("/stats").json()["catchUp"])
        time.sleep(0.05)


def test_memory_search_over_mcp_finds_a_past_claude_code_session(tmp_path: Path, projects: Path) -> None:
    """What a Claude Code user gets: ``openclaw-lossless mcp`` (spawned over stdio, no sidecar) answers from
    their own imported sessions."""
    from mcp.client.session import ClientSession

    from openclaw_lossless.cli.mcp_server import TOOL_NAME
    from openclaw_lossless.cli.store_access import open_file_store
    from openclaw_lossless.transcripts.claude_code import read_claude_code
    from tests.test_mcp_server import server_params, structured, with_client

    session = ClaudeSession(projects)
    session.append(*first_session(session))
    settings = make_settings(tmp_path / "state", embedding_provider="none")
    with open_file_store(settings) as store:
        assert read_claude_code(store.ingest, projects).messages_imported == 4

    async def work(client: ClientSession) -> Any:
        return await client.call_tool(TOOL_NAME, {"query": "Tuesday night watch keeper", "scope": "agent:claude-code"})

    hits = structured(with_client(server_params(settings), work))["hits"]
    assert any("Morwenna Pike" in hit["snippet"] for hit in hits), hits
    assert {hit["agentId"] for hit in hits} == {"claude-code"}
