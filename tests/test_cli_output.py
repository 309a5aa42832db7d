"""What each command prints is what the README says it prints, and it refuses what it must.

Real stores in temp dirs, a real sidecar over real HTTP where a command goes through it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import numpy as np
import pytest

from openclaw_lossless.embed.provider import Vectors
from tests.conversation import commit_body, conversation
from tests.helpers import (
    HashEmbedder,
    LiveSidecar,
    assert_error,
    live_sidecar,
    make_settings,
    run_cli,
    run_cli_json,
    store_rows,
)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """Six turns stored (the staging fact among them) with vectors of a test embedder; then the sidecar stops."""
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        fill(server)
    return tmp_path / "state"


def fill(server: LiveSidecar) -> None:
    for turn in conversation(6):
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    if server.sidecar.embedding.provider is not None:
        server.wait_for_backlog()


def sidecar_cli(capsys: pytest.CaptureFixture[str], server: LiveSidecar, *args: str) -> tuple[int, str, str]:
    """The CLI pointed at the running sidecar's store and port (so the sidecar answers)."""
    from openclaw_lossless.cli.main import main

    code = main([*args, "--state-dir", str(server.settings.state_dir), "--port", str(server.settings.port)])
    out, err = capsys.readouterr()
    return code, out, err


def test_plain_stats_shows_sizes_the_embedder_and_latencies(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        fill(server)
        server.post("assemble", {"sessionId": "s-main", "sessionKey": "agent:main:main", "prompt": "staging?",
                                 "tokenBudget": 4000, "messages": []})  # fmt: skip
        code, out, err = sidecar_cli(capsys, server, "stats")
    assert code == 0, err
    assert "messages: 12 in 1 sessions" in out
    assert "MB on disk" in out and "MB used" in out
    assert "embedder: test-hash hash-words" in out
    assert "assemble: p50" in out
    code, out, err = run_cli(capsys, tmp_path / "state", "stats")  # the file: no sidecar measured anything
    assert code == 0, err
    assert "messages: 12" in out and "latency: nothing measured yet" in out and "MB on disk" in out


@pytest.mark.parametrize("command", [["search", "staging"], ["stats"], ["pack", "--query", "staging"]])
def test_a_query_on_a_store_that_does_not_exist_says_so_and_creates_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, command: list[str], store_backend: str
) -> None:
    state = tmp_path / "typo"
    code, out, err = run_cli(capsys, state, *command)
    assert code == 2 and not out and "Traceback" not in err
    if store_backend == "sqlite":
        assert f"no store at {state / 'lossless.sqlite'}" in err and "--state-dir" in err
    else:  # the schema the settings name holds no store, and the read made none there
        assert "no store in schema" in err and "LOSSLESS_DATABASE_SCHEMA" in err
        tables = "SELECT count(*) FROM pg_tables WHERE schemaname = current_schema()"
        assert store_rows(make_settings(state), tables) == [(0,)]
    assert not state.exists()


def test_pack_trace_without_json_prints_the_trace(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    code, out, err = run_cli(capsys, store, "pack", "--query", "staging database password", "--trace")
    assert code == 0, err
    block, _, trace = out.partition("\ntrace: ")
    assert "staging database password rotates" in block
    assert "candidates for" in trace and "kept  score" in trace and "msg:" in trace
    code, out, _ = run_cli(capsys, store, "pack", "--query", "staging database password")
    assert "trace:" not in out


class OppositeEmbedder(HashEmbedder):
    """The test embedder, except that a text starting with "opposite" points the other way: its cosine to
    every stored message is at most 0, as a real model's can be for an unrelated query."""

    def embed(self, texts: list[str]) -> Vectors:
        vectors = super().embed(texts)
        signs = np.array([-1.0 if text.startswith("opposite") else 1.0 for text in texts], dtype=np.float32)
        flipped: Vectors = vectors * signs[:, None]
        return flipped


def test_search_lists_no_hit_that_matched_nothing(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with live_sidecar(make_settings(tmp_path / "state"), OppositeEmbedder()) as server:
        fill(server)
        code, out, err = sidecar_cli(capsys, server, "search", "staging database", "--mode", "vector", "--json")
        assert code == 0, err
        assert json.loads(out)["hits"] and all(hit["score"] > 0 for hit in json.loads(out)["hits"])
        code, out, err = sidecar_cli(capsys, server, "search", "opposite staging", "--mode", "vector", "--json")
        assert code == 0, err
        assert json.loads(out)["hits"] == []
        code, out, err = sidecar_cli(capsys, server, "search", "opposite staging", "--mode", "vector")
        assert out.strip() == "no matches" and "score 0.000" not in out


def test_a_store_without_vectors_says_nothing_about_a_provider_nobody_configured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with live_sidecar(make_settings(tmp_path / "state", embedding_provider="none"), None) as server:
        fill(server)
    for command in (["search", "staging password"], ["pack", "--query", "staging password"], ["stats"]):
        code, out, err = run_cli(capsys, tmp_path / "state", *command)
        assert code == 0 and out, err
        assert "configured" not in err and err == "", err


def test_export_refuses_to_overwrite_a_file_without_force(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    target = store.parent / "out.jsonl"
    target.write_text("keep me\n")
    code, out, err = run_cli(capsys, store, "export", "-o", str(target))
    assert code == 2 and "already exists" in err and "--force" in err and err.count("\n") == 1 and out == ""
    assert target.read_text() == "keep me\n"
    summary = run_cli_json(capsys, store, "export", "-o", str(target), "--force")
    assert summary["output"] == str(target) and summary["messages"] == 12 and summary["sessions"] == 1
    assert len(target.read_text().splitlines()) > 12
    assert os.stat(target).st_mode & 0o777 == 0o600


def test_json_on_model_fetch(capsys: pytest.CaptureFixture[str], model_dir: Path, tmp_path: Path) -> None:
    data = run_cli_json(capsys, tmp_path / "state", "model", "fetch", "--model-dir", str(model_dir))
    assert data["ready"] is True and Path(data["path"]).is_dir()


def test_a_body_that_is_not_json_gets_a_readable_error(sidecar: LiveSidecar) -> None:
    for hook in ("commit-turn", "assemble"):
        response = sidecar.client.post(
            f"/v1/hooks/{hook}", content=b'{"sessionId": ', headers={"content-type": "application/json"}
        )
        body = assert_error(response, 422, "invalid_request")
        assert body["error"]["message"].startswith("the body is not JSON: "), body
        assert "character 14" in body["error"]["message"]
    response = sidecar.client.post("/v1/forget", content=b"yes please", headers={"content-type": "application/json"})
    assert assert_error(response, 422, "invalid_request")["error"]["message"].startswith("the body is not JSON")
    response = sidecar.client.post("/v1/hooks/commit-turn", content=b"", headers={"content-type": "application/json"})
    assert assert_error(response, 422, "invalid_request")["error"]["message"] == "the body is empty: send a JSON object"


def test_mcp_json_says_on_stderr_what_it_serves_and_keeps_stdout_for_mcp(store: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "mcp", "--json", "--state-dir", str(store), "--port", "9"],
        input="", capture_output=True, text=True, timeout=60, env=os.environ | {"LOSSLESS_EMBEDDING_PROVIDER": "none"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    start = json.loads(done.stderr.splitlines()[0])
    assert start == {"status": "serving", "transport": "stdio", "database": str(store / "lossless.sqlite"),
                     "sidecar": None}  # fmt: skip


def test_serve_json_on_a_port_its_own_sidecar_holds(tmp_path: Path) -> None:
    """A JSON line, exit 0, and nothing opened: the database file is not even created for a new state dir."""
    with live_sidecar(make_settings(tmp_path / "state", embedding_provider="none"), None) as server:
        port = str(server.settings.port)
        again = _serve("--state-dir", str(server.settings.state_dir), "--port", port)
        assert again.returncode == 0, again.stderr
        line = json.loads(again.stdout)
        assert line["status"] == "alreadyServing" and line["pid"] == os.getpid()
        other = tmp_path / "other"
        refused = _serve("--state-dir", str(other), "--port", port)
        assert httpx.get(f"{server.url}/healthz").status_code == 200
    assert refused.returncode == 1
    assert json.loads(refused.stdout)["status"] == "portTaken"
    assert "held by another openclaw-lossless sidecar" in refused.stderr
    assert not (other / "lossless.sqlite").exists()


def _serve(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--json", *args],
        capture_output=True, text=True, timeout=60, env=os.environ | {"LOSSLESS_EMBEDDING_PROVIDER": "none"},
    )  # fmt: skip


def test_recover_opens_a_citation_with_its_neighbours_through_the_sidecar_and_on_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """What ``search`` prints (msg:N) opens with ``recover msg:N``, whether or not a sidecar serves the store."""
    with live_sidecar(make_settings(tmp_path / "state"), HashEmbedder()) as server:
        fill(server)
        hit = run_cli_json(capsys, tmp_path / "state", "search", "staging", "--mode", "keyword")["hits"][0]
        code, served, err = sidecar_cli(capsys, server, "recover", hit["citation"], "--context", "1")
        assert code == 0, err
    assert f"[{hit['citation']}] <- cited" in served and hit["text"] in served
    on_file = run_cli_json(capsys, tmp_path / "state", "recover", hit["citation"], "--context", "1")
    assert on_file["message"]["citation"] == hit["citation"] and on_file["message"]["text"] == hit["text"]
    cited = int(hit["citation"].removeprefix("msg:"))
    neighbours = [m["id"] for m in on_file["before"] + on_file["after"]]
    assert neighbours and all(abs(n - cited) <= 1 for n in neighbours)
    code, _, err = run_cli(capsys, tmp_path / "state", "recover", "msg:999999")
    assert code == 2 and "no message msg:999999" in err and "Traceback" not in err
    code, _, err = run_cli(capsys, tmp_path / "state", "recover", hit["citation"], "--session", "s-main")
    assert code == 2 and "opens one message" in err
