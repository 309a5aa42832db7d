"""Where ``serve`` listens: the loopback TCP port, and a Unix socket in the state dir where the platform has them.

The socket (``<state_dir>/sidecar.sock``, mode 0600 in the 0700 state dir) is the plugin's preferred way in:
only the owner of the state dir can reach it, so no other program can pose as the sidecar there, as one can
by taking the TCP port first. The TCP sockets are bound here, before the store is opened, so a port already in
use is one clear line: ``serve`` tells this state dir's own sidecar (which answers ``/v1/identity`` with this
token's proof) from any other program on the port.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import logging
import os
import secrets
import socket
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from openclaw_lossless.auth_token import SERVICE, identity_proof

log = logging.getLogger(__name__)

SOCKET_NAME = "sidecar.sock"
# sun_path holds 108 bytes on Linux and 104 on the BSDs and macOS, the terminating NUL included.
SOCKET_PATH_LIMIT = 107 if sys.platform.startswith("linux") else 103


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, 127.0.0.0/8, ``::1``): what serves without
    ``--allow-remote``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def socket_path(state_dir: Path) -> Path:
    return state_dir / SOCKET_NAME


def bind_tcp(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address ``host`` resolves to (as asyncio would bind them).

    Raises ``OSError`` (``EADDRINUSE`` when the port is taken) before anything else has been opened.
    """
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.set_inheritable(True)
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return bound


@dataclass
class UnixListener:
    """The bound Unix socket and the inode it created, so shutdown removes only its own file."""

    sock: socket.socket
    path: Path
    inode: int

    def remove(self) -> None:
        """Close, and unlink the file unless another sidecar has replaced it since."""
        self.sock.close()
        with contextlib.suppress(OSError):
            if self.path.lstat().st_ino == self.inode:
                self.path.unlink()


class Server(uvicorn.Server):
    """uvicorn's server, removing the Unix socket file as it shuts down.

    Done here, not after ``run`` returns: uvicorn re-raises the SIGTERM it caught once it has shut down, which
    ends the process before code after ``run`` could remove the file.
    """

    def __init__(self, config: uvicorn.Config, unix: UnixListener | None) -> None:
        super().__init__(config)
        self.unix = unix

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        await super().shutdown(sockets)
        if self.unix is not None:
            self.unix.remove()


def bind_unix(state_dir: Path) -> UnixListener | None:
    """``<state_dir>/sidecar.sock``, or None (with a log line saying why) where it cannot or must not be made."""
    path = socket_path(state_dir)
    if not hasattr(socket, "AF_UNIX"):
        return None
    size = len(os.fsencode(path))
    if size > SOCKET_PATH_LIMIT:
        log.warning(
            "not listening on %s: the path is %d bytes, over this platform's limit of %d;"
            " clients use TCP (the plugin checks the sidecar's identity there)",
            path,
            size,
            SOCKET_PATH_LIMIT,
        )
        return None
    if not _clear_stale(path):
        return None
    state_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(state_dir, 0o700)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(path))
        os.chmod(path, 0o600)
    except OSError as exc:
        sock.close()
        log.warning("not listening on %s: %s; clients use TCP", path, exc)
        return None
    sock.set_inheritable(True)
    return UnixListener(sock, path, path.lstat().st_ino)


def _clear_stale(path: Path) -> bool:
    """True when ``path`` is free to bind: absent, or a socket nobody listens on any more (then removed)."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return True
    if not stat.S_ISSOCK(mode):
        log.warning("not listening on %s: a file that is not a socket is there; move it away", path)
        return False
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink(missing_ok=True)  # stale: left by a sidecar that was killed
        log.info("removed the stale socket %s", path)
        return True
    finally:
        probe.close()
    log.warning("not listening on %s: another sidecar is live there; clients of this one use TCP", path)
    return False


def who_serves(url: str, token: str | None, *, timeout: float = 2) -> dict[str, Any] | None:
    """The identity of whatever answers ``/v1/identity`` at ``url``, with ``ours``: its proof matches ``token``.

    None when nothing answers like an openclaw-lossless sidecar (another program, or no answer at all).
    """
    challenge = secrets.token_hex(32)
    try:
        response = httpx.get(f"{url}/v1/identity", params={"challenge": challenge}, timeout=timeout)
        data = response.json()
    except (httpx.HTTPError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("service") != SERVICE:
        return None
    proof = str(data.get("proof", ""))
    expected = identity_proof(token, challenge) if token else ""
    return data | {"ours": bool(token) and secrets.compare_digest(proof, expected)}


def port_in_use(error: OSError) -> bool:
    return error.errno == errno.EADDRINUSE
