"""Workspace memory files as a second source, through the real app over HTTP, on either backend.

The done-when of the feature: a fact written only into the agent's ``MEMORY.md`` is recalled in a new session,
cited by its file and lines; after the file is edited the old text is never recalled again, by either lane,
and is gone from the store; a deleted file's chunks go. Run with ``--store-backend postgresql`` for PostgreSQL.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.doctor import store_checks
from openclaw_lossless.memory_files.chunks import chunk_markdown
from openclaw_lossless.memory_files.workspaces import locate, memory_paths, read_config
from openclaw_lossless.recall.render import FILES_NOTE
from openclaw_lossless.store.model.transfer.export import ExportScope
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings, store_rows

OLD_FACT = "The spare key to the boathouse is taped under the third step of the porch."
NEW_FACT = "The spare key to the boathouse now hangs on a hook inside the garden shed."
OLD_WORDS = "taped under the third step"
DAILY = "Booked the piano tuner, Mr Quillfeather, for the ninth of December."

MEMORY_MD = f"""# Long-term memory

## Household
- {OLD_FACT}
- The bins go out on Tuesday night.

## Preferences
- Oat milk in coffee, never sugar.
"""


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    stamp = time.time_ns() + 1_000_000_000  # a new mtime even within the file system's clock granularity
    os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "openclaw-state" / "workspace"  # OpenClaw's default: <state>/workspace
    _write(root / "MEMORY.md", MEMORY_MD)
    _write(root / "memory" / "2026-11-30.md", f"# 2026-11-30\n\n{DAILY}\n")
    return root


@pytest.fixture
def server(tmp_path: Path, workspace: Path) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path / "state", memory_files_interval_s=0.2)
    assert settings.openclaw_state == workspace.parent
    with live_sidecar(settings, HashEmbedder()) as live:
        yield live


def _wait(server: LiveSidecar, words: str, *, present: bool, timeout: float = 30) -> None:
    """Until a keyword search of the memory files finds ``words`` (or no longer does), then the backlog drains."""
    deadline = time.monotonic() + timeout
    while (words in _texts(server, words, "keyword", "memory")) != present:
        if time.monotonic() > deadline:
            raise AssertionError(f"memory files not indexed in time: {server.client.get('/v1/memory-files').json()}")
        time.sleep(0.1)
    server.wait_for_backlog()


def _search(server: LiveSidecar, q: str, mode: str, source: str = "all") -> dict[str, Any]:
    response = server.client.get("/v1/search", params={"q": q, "mode": mode, "source": source, "k": 50})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _texts(server: LiveSidecar, q: str, mode: str, source: str = "all") -> str:
    return "\n".join(hit["text"] for hit in _search(server, q, mode, source)["hits"])


def _assemble(server: LiveSidecar, prompt: str, session: str) -> dict[str, Any]:
    body = {"sessionId": session, "sessionKey": f"agent:main:{session}", "messages": [], "prompt": prompt}
    response = server.post("assemble", body)
    assert response.status_code == 200, response.text
    result: dict[str, Any] = response.json()
    return result


def _store_holds(server: LiveSidecar, words: str) -> bool:
    """Whether any byte of the store still holds ``words``: the SQLite file and its WAL as bytes, or on
    PostgreSQL every row of the messages table."""
    settings = server.settings
    if settings.database_url is not None:
        rows = store_rows(settings, "SELECT count(*) FROM messages WHERE text LIKE ? OR original LIKE ?",
                          (f"%{words}%", f"%{words}%"))  # fmt: skip
        return bool(rows[0][0])
    path = settings.database_path
    files = [path, path.with_name(path.name + "-wal")]
    return any(words.encode() in f.read_bytes() for f in files if f.exists())


def test_a_fact_only_in_memory_md_is_recalled_and_never_again_once_edited(server: LiveSidecar, workspace: Path) -> None:
    _wait(server, OLD_WORDS, present=True)
    recalled = _assemble(server, "Where is the spare key to the boathouse?", "fresh-1")
    block = recalled["systemPromptAddition"]
    assert OLD_FACT in block
    assert "[file:MEMORY.md#L4-5]" in block  # the chunk's own citation: its file and lines
    assert FILES_NOTE.strip() in block  # and the block says what such a citation is
    assert any(item["citation"] == "file:MEMORY.md#L4-5" for item in recalled["recalled"])

    _write(workspace / "MEMORY.md", MEMORY_MD.replace(OLD_FACT, NEW_FACT))
    _wait(server, "garden shed", present=True)

    for session, prompt in enumerate(
        ["Where is the spare key to the boathouse?", "Is the key taped under the third step of the porch?"]
    ):
        block = _assemble(server, prompt, f"fresh-{session + 2}")["systemPromptAddition"]
        assert OLD_WORDS not in block
        assert "garden shed" in block
    for mode in ("keyword", "vector", "hybrid"):
        for source in ("all", "memory"):
            assert OLD_WORDS not in _texts(server, OLD_FACT, mode, source), (mode, source)
    assert not _store_holds(server, OLD_WORDS)  # gone from the store as a forgotten message is


def test_a_deleted_file_loses_its_chunks(server: LiveSidecar, workspace: Path) -> None:
    _wait(server, "Quillfeather", present=True)
    listed = server.client.get("/v1/memory-files").json()["files"]
    assert {f["path"] for f in listed} == {"MEMORY.md", "memory/2026-11-30.md"}

    (workspace / "memory" / "2026-11-30.md").unlink()
    _wait(server, "Quillfeather", present=False)
    assert "Quillfeather" not in _texts(server, "piano tuner Quillfeather", "hybrid")
    assert "Quillfeather" not in _assemble(server, "When is the piano tuner coming?", "fresh")["systemPromptAddition"]
    assert [f["path"] for f in server.client.get("/v1/memory-files").json()["files"]] == ["MEMORY.md"]
    assert not _store_holds(server, "Quillfeather")


def test_search_narrows_to_one_source(server: LiveSidecar) -> None:
    _wait(server, "Oat milk", present=True)
    turn = {"sessionId": "s1", "sessionKey": "agent:main:s1", "advancementKey": "t1",
            "messages": [{"role": "user", "content": "I switched to oat milk last week", "timestamp": 1}]}  # fmt: skip
    assert server.post("commit-turn", turn).status_code == 200
    both = _search(server, "oat milk", "keyword")["hits"]
    assert {h["kind"] for h in both} == {"memory", "message"}
    memory = _search(server, "oat milk", "keyword", "memory")["hits"]
    assert memory and all(h["kind"] == "memory" and h["citation"].startswith("file:MEMORY.md#L") for h in memory)
    messages = _search(server, "oat milk", "keyword", "messages")["hits"]
    assert messages and all(h["kind"] == "message" and h["citation"].startswith("msg:") for h in messages)
    bad = server.client.get("/v1/search", params={"q": "oat", "source": "notes"})
    assert bad.status_code == 422 and bad.json()["error"]["code"]


def test_chunks_follow_headings_and_paragraphs() -> None:
    chunks = chunk_markdown(MEMORY_MD + "\n```\n# not a heading\n\nstill code\n```\n")
    assert [(c.first_line, c.last_line) for c in chunks] == [(4, 5), (8, 8), (10, 14)]
    assert chunks[0].text.startswith("Long-term memory › Household\n- The spare key")
    assert chunks[1].headings == ("Long-term memory", "Preferences")
    assert "# not a heading" in chunks[2].body


@pytest.mark.sqlite_only  # no store involved
def test_workspaces_are_found_as_openclaw_finds_them(tmp_path: Path) -> None:
    state = tmp_path / "state"
    for folder in ("workspace", "workspace-ops", "elsewhere/coder", "agents/ops", "agents/coder"):
        (state / folder).mkdir(parents=True)
    found = {w.agent_id: w.root for w in locate(state, {}, None)}
    assert found == {"main": state / "workspace", "ops": state / "workspace-ops"}  # coder has none yet
    config = {
        "agents": {
            "list": [{"id": "main", "default": True}, {"id": "coder", "workspace": str(state / "elsewhere/coder")}]
        }
    }
    found = {w.agent_id: w.root for w in locate(state, config, None)}
    assert found == {"main": state / "workspace", "coder": state / "elsewhere/coder", "ops": state / "workspace-ops"}
    # the host's config (JSON5, as the gateway reads it): a root for the agents' workspaces
    root = tmp_path / "roots"
    (root / "main" / "ops").mkdir(parents=True)  # a configured root: the other agents' are <root>/<agentId>
    (state / "openclaw.json").write_text(
        "// the gateway's config\n"
        f"{{agents: {{defaults: {{workspace: '{root / 'main'}'}},"
        " list: [{id: 'main', default: true}, {id: 'ops'}]}}"
    )
    found = {w.agent_id: w.root for w in locate(state, read_config(state, None), None)}
    assert found == {"main": root / "main", "ops": root / "main" / "ops"}
    # several agents, none marked default: none keeps the default workspace (OpenClaw 2026.9)
    (state / "workspace-main").mkdir()
    unmarked = {"agents": {"list": [{"id": "main"}, {"id": "ops"}]}}
    found = {w.agent_id: w.root for w in locate(state, unmarked, None)}
    assert found == {"main": state / "workspace-main", "ops": state / "workspace-ops"}
    # a link out of the workspace is never followed
    (state / "workspace" / "memory").mkdir()
    (state / "secret.md").write_text("not memory")
    (state / "workspace" / "memory" / "escape.md").symlink_to(state / "secret.md")
    (state / "workspace" / "MEMORY.md").write_text("# notes")
    assert [p for p, _ in memory_paths(state / "workspace")] == ["MEMORY.md"]


def test_the_ui_lists_the_files_and_their_chunks(server: LiveSidecar) -> None:
    _wait(server, "Oat milk", present=True)
    with httpx.Client(base_url=server.url, timeout=30) as browser:
        login = browser.post("/ui/login", data={"token": server.token}, headers={"Origin": server.url})
        assert login.status_code in (200, 303), login.text
        page = browser.get("/ui/memory")
        assert page.status_code == 200
        assert "memory/2026-11-30.md" in page.text and "file:MEMORY.md#L4-5" in page.text
        assert "Oat milk in coffee" in page.text
        found = browser.get("/ui/search", params={"q": "boathouse key", "mode": "keyword"})
        assert "file:MEMORY.md#L4-5" in found.text


def test_a_forgotten_chunk_stays_forgotten_while_the_file_holds_it(server: LiveSidecar) -> None:
    _wait(server, "Oat milk", present=True)
    gone = server.client.post("/v1/forget", json={"match": "oat milk coffee"})
    assert gone.status_code == 200 and gone.json()["forgotten"] == 1, gone.text
    assert server.client.post("/v1/memory-files/reindex").status_code == 200
    assert "Oat milk" not in _texts(server, "oat milk", "keyword")
    # forget by file: every chunk of the daily note, and nothing of MEMORY.md
    bad = server.client.post("/v1/forget", json={"file": "memory/nope.md"})
    assert bad.status_code == 404 and bad.json()["error"]["code"] == "not_found"
    by_file = server.client.post("/v1/forget", json={"file": "memory/2026-11-30.md"}).json()
    assert by_file["forgotten"] == 1 and "Quillfeather" in by_file["messages"][0]["excerpt"]
    server.client.post("/v1/memory-files/reindex")
    assert "Quillfeather" not in _texts(server, "piano tuner Quillfeather", "keyword")
    assert OLD_WORDS in _texts(server, "boathouse key", "keyword", "memory")


def test_the_share_setting_bounds_what_memory_files_take(server: LiveSidecar) -> None:
    _wait(server, OLD_WORDS, present=True)
    body = {"sessionId": "fresh", "sessionKey": "agent:main:fresh", "messages": [],
            "prompt": "Where is the spare key to the boathouse?"}  # fmt: skip
    off = server.post("assemble", body | {"config": {"memoryFileShare": 0}}).json()
    assert OLD_WORDS not in off["systemPromptAddition"] and FILES_NOTE.strip() not in off["systemPromptAddition"]
    assert OLD_WORDS in _texts(server, "boathouse key", "keyword", "memory")  # still searchable
    on = server.post("assemble", body).json()
    assert OLD_WORDS in on["systemPromptAddition"]


def test_chunks_the_size_cap_archived_are_stored_again(tmp_path: Path, workspace: Path) -> None:
    settings = make_settings(tmp_path / "state", memory_files_interval_s=0)  # a pass at start, then on request
    with live_sidecar(settings, HashEmbedder()) as server:
        _wait(server, OLD_WORDS, present=True)
        sidecar = server.sidecar
        pruned = sidecar.ops.archive.prune(sidecar.db, settings.archive_dir, 0.001)
        assert getattr(pruned, "pruned", 0) >= 1
        assert OLD_WORDS not in _texts(server, "boathouse key", "keyword", "memory")  # archived with the oldest
        assert server.client.post("/v1/memory-files/reindex").json()["chunks_added"] >= 1
        assert OLD_WORDS in _texts(server, "boathouse key", "keyword", "memory")


def test_an_export_carries_the_chunks_into_another_store(server: LiveSidecar, tmp_path: Path) -> None:
    _wait(server, OLD_WORDS, present=True)
    exported = tmp_path / "all.jsonl"
    sidecar = server.sidecar
    with exported.open("w") as out:
        sidecar.ops.transfer.write_jsonl(sidecar.ops.transfer.export_store(sidecar.db.reader(), ExportScope()), out)
    with live_sidecar(make_settings(tmp_path / "copy", memory_files=False), HashEmbedder()) as copy:
        report = copy.sidecar.ops.transfer.restore_jsonl(copy.sidecar.db, exported, copy.sidecar.capture_options)
        assert report.imported >= 3, report
        hits = _search(copy, "boathouse key", "keyword", "memory")["hits"]
        assert [h["citation"] for h in hits if OLD_WORDS in h["text"]] == ["file:MEMORY.md#L4-5"]


def test_doctor_counts_the_files_and_names_one_not_yet_indexed(tmp_path: Path, workspace: Path) -> None:
    settings = make_settings(tmp_path / "state", memory_files_interval_s=0)  # a pass at start, then on request
    with live_sidecar(settings, HashEmbedder()) as server:
        _wait(server, "Quillfeather", present=True)
        sidecar = server.sidecar
        finding = store_checks.memory_files(sidecar.ops, sidecar.db.reader(), settings)
        assert finding.ok and finding.code == "memory_files_ok" and finding.data is not None
        assert finding.data["files"] == 2 and finding.data["chunks"] == 3
        _write(workspace / "memory" / "2026-12-01.md", "Bought a new kettle.\n")
        waiting = store_checks.memory_files(sidecar.ops, sidecar.db.reader(), settings)
        assert waiting.ok and waiting.code == "memory_files_waiting" and waiting.fix and waiting.data is not None
        assert waiting.data["waiting"] == ["main:memory/2026-12-01.md"]
        assert server.client.post("/v1/memory-files/reindex").json()["chunks_added"] == 1
        assert store_checks.memory_files(sidecar.ops, sidecar.db.reader(), settings).code == "memory_files_ok"


def test_the_cli_searches_one_source_and_forgets_a_file(
    server: LiveSidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    _wait(server, "Quillfeather", present=True)
    args = ["--state-dir", str(server.settings.state_dir), "--port", str(server.settings.port)]
    assert main(["search", "piano tuner", "--source", "memory", "--mode", "keyword", *args]) == 0
    out, _ = capsys.readouterr()
    assert "file:memory/2026-11-30.md#L3-3" in out
    assert main(["forget", "--file", "memory/none.md", "--yes", *args]) != 0
    _, err = capsys.readouterr()
    assert "no chunk of a memory file 'memory/none.md' is stored" in err and "Traceback" not in err
    assert main(["forget", "--file", "memory/2026-11-30.md", "--yes", *args]) == 0
    capsys.readouterr()
    assert "Quillfeather" not in _texts(server, "piano tuner Quillfeather", "keyword")
