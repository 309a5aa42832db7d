"""Nobody in: loopback by default, a token on every endpoint but the public two, private files, names that stay names.

The public endpoints are exactly /healthz and /v1/identity (which proves the token without revealing it).

The endpoint list comes from the app's own OpenAPI schema, so an endpoint added later is covered without
touching this file.
"""

from __future__ import annotations

import hmac
import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.store.sqlite.connection import Database
from openclaw_lossless.store.sqlite.migrations import migrate
from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, db_fingerprint, live_sidecar, make_settings
from tests.reliability import SidecarProcess

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test

PUBLIC = {"/healthz", "/v1/identity"}


def _routes(client: httpx.Client) -> list[tuple[str, str]]:
    schema = client.get("/openapi.json").json()
    routes = [
        (method.upper(), path.replace("{session_id}", "s-main").replace("{message_id}", "1"))
        for path, methods in schema["paths"].items()
        for method in methods
    ]
    return [*routes, ("GET", "/openapi.json"), ("GET", "/docs"), ("GET", "/redoc"), ("GET", "/v1/no-such-route")]


def test_every_endpoint_but_the_public_ones_answers_401_without_or_with_a_wrong_token(sidecar: LiveSidecar) -> None:
    for turn in conversation(2):
        sidecar.post("commit-turn", commit_body(turn))
    before = db_fingerprint(sidecar.settings)
    token = sidecar.token
    wrong = [
        None,
        "Bearer wrong",
        f"Bearer {token}x",
        f"Bearer {token[:-1]}",
        f"bearer {token}",
        f"Bearer  {token}",
        f"Basic {token}",
        token,
        "Bearer",
    ]
    routes = _routes(sidecar.client)
    assert len(routes) > 15
    body = commit_body(conversation(1)[0]) | {"advancementKey": "sneaky"}
    for method, path in routes:
        for authorization in wrong:
            headers = {} if authorization is None else {"Authorization": authorization}
            response = httpx.request(
                method,
                sidecar.url + path,
                headers=headers,
                params={"token": token},
                json=body if method == "POST" else None,
            )
            if path in PUBLIC:
                assert response.status_code in (200, 422), (path, response.text)  # identity: no challenge here
            else:
                assert_error(response, 401, "unauthorized")
            assert token not in response.text
    assert {path for _, path in routes} >= PUBLIC
    assert db_fingerprint(sidecar.settings) == before


def test_the_token_is_compared_in_constant_time(sidecar: LiveSidecar, monkeypatch: pytest.MonkeyPatch) -> None:
    compared: list[tuple[bytes, bytes]] = []
    original = hmac.compare_digest

    def recording(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return original(a, b)

    monkeypatch.setattr(hmac, "compare_digest", recording)  # what the guard calls, looked up per request
    assert_error(httpx.get(sidecar.url + "/stats", headers={"Authorization": "Bearer nope"}), 401, "unauthorized")
    assert sidecar.client.get("/stats").status_code == 200
    assert [a for a, _ in compared] == [b"Bearer nope", f"Bearer {sidecar.token}".encode()]


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "example.com", "localhost.example.com", ""])
def test_serve_refuses_a_non_loopback_address_without_the_flag(tmp_path: Path, host: str) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--host", host, "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert "not loopback" in refused.stderr and "--allow-remote" in refused.stderr
    assert "Traceback" not in refused.stderr
    env = os.environ | {"LOSSLESS_HOST": host or "0.0.0.0"}
    refused = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert refused.returncode == 2 and "not loopback" in refused.stderr


def _listening(port: int) -> set[str]:
    """The IPv4 addresses a socket listens on at ``port``, from /proc (``0.0.0.0``: every interface)."""
    found: set[str] = set()
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.split(":")
        if int(hex_port, 16) == port and state == "0A":  # TCP_LISTEN
            found.add(".".join(str(b) for b in reversed(bytes.fromhex(address))))
    return found


def test_allow_remote_serves_every_interface_and_every_endpoint_but_healthz_needs_the_token(tmp_path: Path) -> None:
    """Bound to 0.0.0.0 on purpose, reached (as every test here) only through 127.0.0.1."""
    server = SidecarProcess(
        tmp_path / "state", env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}, args=["--host", "0.0.0.0", "--allow-remote"]
    ).spawn()
    try:
        server.wait_healthy()
        assert _listening(server.port) == {"0.0.0.0"}
        with server.client() as client:
            routes = _routes(client)
            assert client.get("/stats").status_code == 200
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {server.token()}x"}):
                response = httpx.request(
                    method, server.url + path, headers=headers, json={} if method == "POST" else None
                )
                if path in PUBLIC:
                    assert response.status_code in (200, 422), (path, response.text)
                else:
                    assert_error(response, 401, "unauthorized")
    finally:
        server.stop()


@pytest.mark.parametrize("token", ["", "short", " " * 20])
def test_serve_refuses_a_guessable_explicit_token(tmp_path: Path, token: str) -> None:
    env = os.environ | {"LOSSLESS_TOKEN": token}
    refused = subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--host", "0.0.0.0", "--allow-remote",
         "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("openclaw-lossless: bad setting token") and "Traceback" not in refused.stderr


def test_a_weak_token_file_is_replaced_by_a_strong_one(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "token").write_text("abc\n")
    settings = make_settings(state)
    with live_sidecar(settings, HashEmbedder()) as server:
        assert len(server.token) >= 32 and server.token != "abc"  # noqa: S105
        assert_error(httpx.get(server.url + "/stats", headers={"Authorization": "Bearer abc"}), 401, "unauthorized")
        assert server.client.get("/stats").status_code == 200


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_state_dir_is_0700_and_every_file_0600(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.umask(0o022)  # what a user's shell usually has: the product must not rely on a strict umask
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    settings = make_settings(state, max_db_size_mb=0.2)
    with live_sidecar(settings, HashEmbedder()) as server:
        for turn in conversation(60):
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        server.sidecar.ops.archive.prune(server.sidecar.db, settings.archive_dir, 0.05)
        database = settings.database_path
        on_file = settings.database_url is None  # a PostgreSQL store's files are the server's, not the state dir's
        store_files = [database, Path(f"{database}-wal"), Path(f"{database}-shm")] if on_file else []
        files = [*store_files, settings.token_path]
        archives = sorted(settings.archive_dir.glob("*.jsonl.gz"))
        assert archives and all(path.exists() for path in files)
        assert _mode(state) == 0o700 and _mode(settings.archive_dir) == 0o700
        assert {str(path): _mode(path) for path in [*files, *archives]} == {str(p): 0o600 for p in [*files, *archives]}

    export = tmp_path / "export.jsonl"
    export.write_text("")
    export.chmod(0o644)  # an existing file keeps its mode under O_CREAT: the export must tighten it
    assert main(["export", "-o", str(export), "--force", "--state-dir", str(state), "--port", "9"]) == 0
    assert _mode(export) == 0o600

    capsys.readouterr()
    assert main(["doctor", "--json", "--state-dir", str(state), "--port", "9"]) in (0, 1)
    findings = {f["check"]: f for f in json.loads(capsys.readouterr().out)["findings"]}
    assert findings["permissions"]["ok"], findings["permissions"]
    for loose in [*store_files[2:], archives[0]]:
        loose.chmod(0o644)
        assert main(["doctor", "--json", "--state-dir", str(state), "--port", "9"]) == 1
        finding = {f["check"]: f for f in json.loads(capsys.readouterr().out)["findings"]}["permissions"]
        assert not finding["ok"] and str(loose) in finding["detail"] and finding["fix"]
        loose.chmod(0o600)


def test_a_db_path_outside_the_state_dir_leaves_its_directory_alone(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    db = Database(shared / "lossless.sqlite")
    try:
        migrate(db)
    finally:
        db.close()
    assert _mode(shared) == 0o755
    assert _mode(shared / "lossless.sqlite") == 0o600


# -- names and paths -----------------------------------------------------------------------------------------

HOSTILE_NAMES = ["../x", "../../etc/passwd", "a/b", "x\x00y", "x" * 5000, ".hidden", "rm -rf /", "a b", "é" * 300]


def _plant_transcript(openclaw_state: Path, relative: str, text: str) -> Path:
    """A valid OpenClaw transcript at ``agents/main/sessions/<relative>.jsonl``, wherever that resolves."""
    path = openclaw_state / "agents" / "main" / "sessions" / f"{relative}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    entry = {"type": "message", "id": "e1", "timestamp": "2026-01-01T00:00:00Z",
             "message": {"role": "user", "content": text, "timestamp": 1_767_225_600_000}}  # fmt: skip
    path.write_text(json.dumps({"type": "session", "id": "x"}) + "\n" + json.dumps(entry) + "\n")
    return path


@pytest.mark.parametrize("session_id", ["../../../outside", "../sessions/inside", "..", "/etc/passwd", "a/../../b"])
def test_a_session_id_is_never_a_path_to_read(tmp_path: Path, session_id: str) -> None:
    settings = make_settings(tmp_path / "state")
    (settings.openclaw_state / "agents" / "main" / "sessions").mkdir(parents=True)
    planted = _plant_transcript(settings.openclaw_state, session_id, "planted outside the transcripts dir")
    assert planted.exists()
    with live_sidecar(settings, HashEmbedder()) as server:
        response = server.post("bootstrap", {"sessionId": session_id, "sessionKey": "agent:main:main"})
        if response.status_code == 200:
            assert response.json()["importedMessages"] == 0
        else:
            assert_error(response, 422, "invalid_request")
        assert server.client.get("/stats").json()["messages"] == 0


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_session_ids_with_paths_nul_or_huge_are_stored_as_names_or_refused(sidecar: LiveSidecar, name: str) -> None:
    before = sorted(p.name for p in sidecar.settings.state_dir.iterdir())
    turn = {
        "sessionId": name,
        "advancementKey": f"k-{len(name)}-{name[:3]}",
        "messages": [{"role": "user", "content": "hi"}],
    }
    response = sidecar.post("commit-turn", turn)
    if response.status_code == 200:
        assert response.json()["status"] == "committed"
        assert name in {s["sessionId"] for s in sidecar.client.get("/v1/search", params={"q": "hi"}).json()["hits"]}
    else:
        assert_error(response, 422, "invalid_request")
        assert len(name) > 512 or "\x00" in name
    assert sorted(p.name for p in sidecar.settings.state_dir.iterdir()) == before


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


@pytest.fixture
def store(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    with live_sidecar(make_settings(state), HashEmbedder()) as server:
        server.post("commit-turn", commit_body(conversation(1)[0]))
    return state


@pytest.mark.parametrize("name", [n for n in HOSTILE_NAMES if "\x00" not in n])  # argv cannot carry NUL
def test_snapshot_names_are_refused_in_one_line_and_write_nothing(
    capsys: pytest.CaptureFixture[str], store: Path, name: str
) -> None:
    before = db_fingerprint(make_settings(store))
    files = sorted(p.name for p in store.rglob("*"))
    code, err = _cli(capsys, "snapshot", "create", name, "--state-dir", str(store), "--port", "9")
    assert code == 2 and err.startswith("openclaw-lossless: a snapshot name is") and err.count("\n") == 1
    code, err = _cli(capsys, "snapshot", "show", name, "--state-dir", str(store), "--port", "9")
    assert code == 2 and "Traceback" not in err and err.count("\n") == 1
    assert db_fingerprint(make_settings(store)) == before
    assert sorted(p.name for p in store.rglob("*")) == files


@pytest.mark.parametrize(
    "target", ["missing-dir/out.jsonl", "a-directory", "x" * 5000, f"{'d' * 200}/{'f' * 300}.jsonl"]
)
def test_export_to_a_bad_path_is_one_line_and_writes_nothing_elsewhere(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path, target: str
) -> None:
    work = tmp_path / "work"
    (work / "a-directory").mkdir(parents=True)
    files = sorted(p.name for p in tmp_path.rglob("*"))
    code, err = _cli(capsys, "export", "-o", str(work / target), "--state-dir", str(store), "--port", "9")
    assert code == 1 and err.startswith("openclaw-lossless: ") and err.count("\n") == 1 and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == files


def test_export_with_dotdot_goes_exactly_where_it_says(
    capsys: pytest.CaptureFixture[str], store: Path, tmp_path: Path
) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    code, _ = _cli(capsys, "export", "-o", str(tmp_path / "a" / "b" / ".." / "out.jsonl"), "--state-dir", str(store),
                   "--port", "9")  # fmt: skip
    assert code == 0 and (tmp_path / "a" / "out.jsonl").is_file()
    assert not (tmp_path / "a" / "b" / "out.jsonl").exists()
