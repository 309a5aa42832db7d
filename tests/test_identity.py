"""Only the token holder can answer the identity challenge, and ``serve`` listens where only its owner reaches it.

``GET /v1/identity?challenge=<hex>`` is public: a client checks that the program on the port holds the sidecar's
token (``HMAC-SHA256(token, "openclaw-lossless identity v1\\n" + challenge)``) before it sends the conversation
or the token. ``serve`` also listens on ``<state_dir>/sidecar.sock`` (0600), and says clearly when the port is
already served: exit 0 when it is this state dir's own sidecar, 1 when it is another program.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import httpx
import pytest

from openclaw_lossless import __version__
from openclaw_lossless.api.identity import store_id
from tests.conversation import commit_body, conversation
from tests.helpers import LiveSidecar, assert_error
from tests.reliability import SidecarProcess

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test


def expected_proof(token: str, challenge: str) -> str:
    return hmac.new(token.encode(), f"openclaw-lossless identity v1\n{challenge}".encode(), hashlib.sha256).hexdigest()


def test_identity_answers_the_proof_only_the_token_holder_can_give(sidecar: LiveSidecar) -> None:
    for challenge in (secrets.token_hex(16), secrets.token_hex(64), "AB" * 20):
        response = httpx.get(f"{sidecar.url}/v1/identity", params={"challenge": challenge})  # no token sent
        assert response.status_code == 200, response.text
        body = response.json()
        assert body == {
            "service": "openclaw-lossless",
            "version": __version__,
            "pid": os.getpid(),
            "store": store_id(sidecar.settings),  # which store it serves
            "proof": expected_proof(sidecar.token, challenge),
        }
        assert body["store"] is not None
        assert sidecar.token not in response.text
    first = httpx.get(f"{sidecar.url}/v1/identity", params={"challenge": "0" * 64}).json()["proof"]
    assert first != expected_proof("another-token-of-the-same-length-xxxxxxxxx", "0" * 64)


@pytest.mark.parametrize("challenge", [None, "", "abc", "0" * 31, "0" * 129, "g" * 40, "0" * 32 + " ", "0x" + "0" * 40])
def test_a_bad_challenge_is_refused_in_the_error_shape(sidecar: LiveSidecar, challenge: str | None) -> None:
    params = {} if challenge is None else {"challenge": challenge}
    body = assert_error(httpx.get(f"{sidecar.url}/v1/identity", params=params), 422, "invalid_request")
    assert "challenge" in body["error"]["message"]


def _get_over_socket(path: Path, target: str, token: str | None = None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(path)), base_url="http://sidecar") as client:
        return client.get(target, headers=headers)


@pytest.fixture
def short_state() -> Iterator[Path]:
    """A state dir whose socket path fits the platform limit (pytest's own temp paths can be too long)."""
    base = Path(tempfile.mkdtemp(prefix="ll-"))
    try:
        yield base / "state"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_serve_listens_on_a_private_unix_socket_and_removes_it_at_shutdown(short_state: Path) -> None:
    server = SidecarProcess(short_state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}).spawn()
    sock = short_state / "sidecar.sock"
    try:
        server.wait_healthy()
        assert stat.S_ISSOCK(sock.lstat().st_mode)
        assert stat.S_IMODE(sock.lstat().st_mode) == 0o600
        assert stat.S_IMODE(short_state.stat().st_mode) == 0o700
        assert _get_over_socket(sock, "/healthz").status_code == 200
        assert_error(_get_over_socket(sock, "/stats"), 401, "unauthorized")  # the socket needs the token too
        assert _get_over_socket(sock, "/stats", server.token()).status_code == 200
        with httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://sidecar") as client:
            turn = commit_body(conversation(1)[0])
            answer = client.post(
                "/v1/hooks/commit-turn", json=turn, headers={"Authorization": f"Bearer {server.token()}"}
            )
            assert answer.json()["status"] == "committed"
    finally:
        server.stop()
    assert not sock.exists()


def test_a_stale_socket_is_replaced_and_a_too_long_path_falls_back_to_tcp(short_state: Path, tmp_path: Path) -> None:
    short_state.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(short_state / "sidecar.sock"))  # bound, never listening: what a SIGKILLed sidecar leaves
    stale.close()
    server = SidecarProcess(short_state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}, args=["--log-level", "info"])
    server.spawn()
    try:
        server.wait_healthy()
        assert _get_over_socket(short_state / "sidecar.sock", "/healthz").status_code == 200
    finally:
        server.stop()
    assert "removed the stale socket" in server.log.read_text()

    deep = tmp_path / ("d" * 100) / "state"
    deep.parent.mkdir()
    server = SidecarProcess(deep, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}, args=["--log-level", "info"]).spawn()
    try:
        server.wait_healthy()
        assert not (deep / "sidecar.sock").exists()
        assert server.client().get("/stats").status_code == 200
    finally:
        server.stop()
    assert "over this platform's limit" in server.log.read_text()


def _serve_again(state: Path, port: int) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openclaw_lossless", "serve", "--state-dir", str(state), "--port", str(port)],
        capture_output=True, text=True, timeout=60, env=os.environ | {"LOSSLESS_EMBEDDING_PROVIDER": "none"},
    )  # fmt: skip


def test_serve_on_a_port_its_own_sidecar_serves_says_so_and_exits_0(short_state: Path, tmp_path: Path) -> None:
    server = SidecarProcess(short_state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}).spawn()
    try:
        server.wait_healthy()
        (short_state / "sidecar.owner").write_text(json.dumps({"pid": server.pid}))
        again = _serve_again(short_state, server.port)
        assert again.returncode == 0, again.stderr
        assert f"already serving {short_state}" in again.stdout and f"pid {server.pid}" in again.stdout
        assert "started by the OpenClaw plugin" in again.stdout
        assert "Traceback" not in again.stderr

        other = _serve_again(tmp_path / "other", server.port)  # same port, another state dir
        assert other.returncode == 1
        assert f"port {server.port} on 127.0.0.1 is held by another openclaw-lossless sidecar" in other.stderr
        assert server.client().get("/stats").status_code == 200  # the running one is untouched
    finally:
        server.stop()


def test_serve_on_a_port_another_program_holds_says_so_and_exits_1(tmp_path: Path) -> None:
    class Html(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"<html>nope</html>")

        def log_message(self, *args: object) -> None:
            return

    foreign = ThreadingHTTPServer(("127.0.0.1", 0), Html)
    Thread(target=foreign.serve_forever, daemon=True).start()
    try:
        done = _serve_again(tmp_path / "state", foreign.server_address[1])
    finally:
        foreign.shutdown()
    assert done.returncode == 1
    assert f"port {foreign.server_address[1]} on 127.0.0.1 is held by another program" in done.stderr
    assert "--port" in done.stderr and "Traceback" not in done.stderr


def test_the_plugin_reaches_the_real_sidecar_over_its_socket(short_state: Path) -> None:
    """Default sidecarUrl, and the state dir's socket: the plugin's tools get their answer through the socket."""
    from tests.e2e.test_plugin_contract import require_node
    from tests.test_agent_tools import DRIVER

    server = SidecarProcess(short_state, env={"LOSSLESS_EMBEDDING_PROVIDER": "none"}).spawn()
    try:
        server.wait_healthy()
        turn = commit_body(conversation(1)[0]) | {"sessionKey": "agent:main:main"}
        turn["messages"][0]["content"] = "The socket rehearsal happens on Thursday in room Kestrel."
        assert server.client().post("/v1/hooks/commit-turn", json=turn).json()["status"] == "committed"
        config = {"stateDir": str(short_state), "autoStart": False}  # sidecarUrl: the default 127.0.0.1:8377
        calls = [["lossless_search", {"query": "Kestrel rehearsal", "scope": "all"}]]
        done = subprocess.run(
            [require_node(), str(DRIVER)],
            input=json.dumps({"config": config, "context": {"agentId": "main"}, "calls": calls}),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        result = json.loads(done.stdout)["results"][0]
        assert "result" in result, result
        assert "Kestrel" in result["result"]["content"][0]["text"]
    finally:
        server.stop()


def test_the_manifest_names_exactly_the_apps_public_paths() -> None:
    from openclaw_lossless.app import PUBLIC_PATHS

    manifest = json.loads((Path(__file__).resolve().parents[1] / "plugin-manifest.json").read_text())
    assert set(manifest["auth"]["public"]) == set(PUBLIC_PATHS) == {"/healthz", "/v1/identity"}
    assert manifest["operator"]["identity"]["path"] == "/v1/identity"


def test_a_second_serve_on_the_same_state_dir_leaves_the_live_socket_alone(short_state: Path) -> None:
    env = {"LOSSLESS_EMBEDDING_PROVIDER": "none"}
    first = SidecarProcess(short_state, env=env).spawn()
    second = None
    try:
        first.wait_healthy()
        inode = (short_state / "sidecar.sock").lstat().st_ino
        second = SidecarProcess(short_state, env=env, args=["--log-level", "info"]).spawn()
        second.wait_healthy()
        assert (short_state / "sidecar.sock").lstat().st_ino == inode
        assert _get_over_socket(short_state / "sidecar.sock", "/healthz").json()["pid"] == first.pid
        second.stop()
        assert "another sidecar is live there" in second.log.read_text()
        assert (short_state / "sidecar.sock").lstat().st_ino == inode  # its shutdown removed nothing of the first's
    finally:
        if second is not None:
            second.stop()
        first.stop()
