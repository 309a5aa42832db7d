"""Does the plugin's ``sidecarUrl`` reach THIS sidecar (the one holding the plugin's token)?

The probe is the public identity challenge: ``GET <url>/v1/identity?challenge=<64 hex>``, answered with
``proof = HMAC-SHA256(token, "openclaw-lossless identity v1\\n" + challenge)``. Doctor computes the same HMAC
from the token file in the plugin's state dir and compares: only the token holder can answer, and the token
itself never leaves this process. A URL that is not loopback is probed only when the config allows remote.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

import openclaw_lossless
from openclaw_lossless.auth_token import SERVICE, identity_proof
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.gateway import running_gateway
from openclaw_lossless.listeners import is_loopback, socket_path

DEFAULT_URL = "http://127.0.0.1:8377"
IDENTITY_PATH = "/v1/identity"
PROBE_TIMEOUT_S = 3.0
CHECK = "sidecar-reach"


@dataclass(frozen=True)
class Target:
    url: str
    host: str
    port: int
    state_dir: Path
    auto_start: bool
    gateway: dict[str, Any] | None = None  # the running gateway's pid and port (None: not running)


def _set_url(url: str) -> str:
    return f"openclaw config set plugins.entries.lossless.config.sidecarUrl {url}"


def _edit_url(config_path: Path) -> str:
    """An invalid sidecarUrl makes OpenClaw reject the config, and `openclaw config set` with it: edit it."""
    return (
        f'edit {config_path}: plugins.entries.lossless.config.sidecarUrl = "{DEFAULT_URL}" (or another loopback'
        " URL with scheme and port); `openclaw config set` refuses while the config is invalid"
    )


def target(config: dict[str, Any], state_dir: Path, openclaw_state: Path, config_path: Path) -> Target | Finding:
    """The URL the plugin will use, or the finding that says why it cannot be used as it is."""
    url = str(config.get("sidecarUrl", DEFAULT_URL)).rstrip("/")
    parts = urlsplit(url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port < 0:
        return Finding(
            CHECK,
            False,
            f"sidecarUrl {url!r} is not an http:// URL with a host and port: the plugin cannot reach any sidecar,"
            " so nothing is stored",
            _edit_url(config_path),
            code="sidecar_url_invalid",
            data={"url": url},
        )
    host = parts.hostname
    if not is_loopback(host) and config.get("allowRemoteSidecar") is not True:
        return Finding(
            CHECK,
            False,
            f"sidecarUrl {url} is not a loopback address and allowRemoteSidecar is not set: the conversation"
            " would leave this machine, so the plugin refuses it (not probed)",
            _edit_url(config_path),
            code="sidecar_url_remote",
            data={"url": url},
        )
    auto_start = config.get("autoStart", True) is not False
    return Target(url, host, port, state_dir, auto_start, running_gateway(openclaw_state))


def reach(config: dict[str, Any], state_dir: Path, openclaw_state: Path, config_path: Path) -> Finding:
    """The plugin's way in, checked as the plugin takes it: the state dir's Unix socket when sidecarUrl is the
    default and the socket exists, else (or when the socket does not answer) sidecarUrl over TCP."""
    where = target(config, state_dir, openclaw_state, config_path)
    if isinstance(where, Finding):
        return where
    socket = socket_path(state_dir)
    if where.url == DEFAULT_URL and socket.is_socket():
        found = _probe(where, httpx.HTTPTransport(uds=str(socket)), "http://localhost", str(socket))
        if found.ok and found.code == "sidecar_verified":
            return found
    return _probe(where, httpx.HTTPTransport(), where.url, where.url)


def _probe(where: Target, transport: httpx.HTTPTransport, base: str, via: str) -> Finding:
    challenge = secrets.token_hex(32)
    client = httpx.Client(transport=transport, timeout=PROBE_TIMEOUT_S, follow_redirects=False, trust_env=False)
    try:
        with client:
            response = client.get(f"{base}{IDENTITY_PATH}", params={"challenge": challenge})
            health = None if response.status_code == 200 else _healthz(client, base)
    except httpx.ConnectError:
        return _not_running(where)
    except httpx.HTTPError as exc:
        return _foreign(where, f"it accepted the connection but gave no HTTP answer ({type(exc).__name__})")
    body = _json(response)
    if response.status_code != 200 or body.get("service") != SERVICE:
        if health is not None and "version" in health and "pid" in health:
            return _old_sidecar(where, health)
        return _foreign(where, f"it answers the identity challenge with HTTP {response.status_code}")
    return _verify(where, body, challenge, via)


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _healthz(client: httpx.Client, url: str) -> dict[str, Any] | None:
    try:
        return _json(client.get(f"{url}/healthz"))
    except httpx.HTTPError:
        return None


def _serve(where: Target) -> str:
    return f"openclaw-lossless serve --host {where.host} --port {where.port} --state-dir {where.state_dir}"


def _not_running(where: Target) -> Finding:
    """Nothing listening is a note only while no gateway runs and autoStart is on: nothing needs it yet."""
    data = {"url": where.url, "autoStart": where.auto_start, "gateway": where.gateway}
    if not where.auto_start:
        return Finding(
            CHECK,
            False,
            f"nothing listens on {where.url} and autoStart is off: every turn runs without memory",
            f"{_serve(where)} (or openclaw config set plugins.entries.lossless.config.autoStart true)",
            code="sidecar_not_running",
            data=data,
        )
    if where.gateway is not None:
        return Finding(
            CHECK,
            False,
            f"the gateway is running (pid {where.gateway['pid']}) but nothing listens on {where.url}: turns are"
            " not stored now. The plugin restarts only a sidecar it started itself; one started by hand or by a"
            " supervisor is left alone (once one runs again, it catches up from the host's transcripts)",
            f"start it again yourself: {_serve(where)}; or restart the gateway to let the plugin start and watch it",
            code="sidecar_not_running",
            data=data,
        )
    return Finding(
        CHECK,
        True,
        f"nothing listens on {where.url}; no gateway runs and autoStart is on, so the plugin starts the sidecar"
        " at the gateway's first turn",
        f"to start it now: {_serve(where)}",
        code="sidecar_not_running",
        data=data,
    )


def _foreign(where: Target, how: str) -> Finding:
    holder = listener(where.port)
    who = f" ({holder['name']}, pid {holder['pid']})" if holder else ""
    return Finding(
        CHECK,
        False,
        f"port {where.port} is held by another program{who}: {how}, so it is not this sidecar and the plugin"
        " sends it nothing",
        f"stop that program, or move the sidecar to a free port: {_set_url('http://127.0.0.1:<free port>')}",
        code="port_held_by_other_program",
        data={"url": where.url, "holder": holder},
    )


def _old_sidecar(where: Target, health: dict[str, Any]) -> Finding:
    return Finding(
        CHECK,
        False,
        f"an openclaw-lossless sidecar {health.get('version')} (pid {health.get('pid')}) answers on {where.url}"
        f" but cannot prove its identity: it is older than this package ({openclaw_lossless.__version__})",
        f"stop it (kill {health.get('pid')}); the plugin starts the installed one, or: {_serve(where)}",
        code="sidecar_version_mismatch",
        data={"url": where.url, "pid": health.get("pid"), "version": health.get("version")},
    )


def _verify(where: Target, body: dict[str, Any], challenge: str, via: str) -> Finding:
    pid, running = body.get("pid"), body.get("version")
    facts = {"url": where.url, "via": via, "pid": pid, "version": running, "stateDir": str(where.state_dir)}
    token_path = where.state_dir / "token"
    try:
        token = token_path.read_text(encoding="utf-8").strip()
    except OSError:
        token = ""
    proof = body.get("proof")
    if not token or not isinstance(proof, str) or not hmac.compare_digest(proof, identity_proof(token, challenge)):
        reason = "there is no token in it yet" if not token else "it holds another token"
        return Finding(
            CHECK,
            False,
            f"the sidecar on {where.url} (pid {pid}) is not the plugin's: it runs with another state dir than"
            f" {where.state_dir} ({reason}), so the plugin's requests are refused",
            f"stop it (kill {pid}); the plugin then starts its own, or: {_serve(where)}",
            code="sidecar_other_token",
            data=facts,
        )
    mine = openclaw_lossless.__version__
    if running != mine:
        return Finding(
            CHECK,
            False,
            f"the sidecar on {where.url} (pid {pid}) runs version {running}, the installed package is {mine}",
            f"restart it: kill {pid}; the plugin starts the installed one, or: {_serve(where)}",
            code="sidecar_version_mismatch",
            data=facts,
        )
    return Finding(
        CHECK,
        True,
        f"{via} answers as this sidecar (pid {pid}, version {running})",
        code="sidecar_verified",
        data=facts,
    )


def listener(port: int) -> dict[str, Any] | None:
    """The process listening on a TCP port, when this user may see it (Linux ``/proc``); else None."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                return {"pid": int(proc.name), "name": (proc / "comm").read_text().strip()}
        except OSError:
            continue
    return None
