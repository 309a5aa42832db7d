"""The private network namespace the end-to-end run lives in, and small loopback HTTP helpers.

Everything here is for a process started with ``unshare -n``: it brings ``lo`` up, refuses to go on where any
other interface exists, and can list (and so stop) every process of the namespace, all of them the driver's.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import free_port as free_port  # the one the tests and the benchmarks share


def bring_up_loopback() -> None:
    """``ip link set lo up`` without iproute2: SIOCGIFFLAGS / SIOCSIFFLAGS on a datagram socket."""
    siocgifflags, siocsifflags, iff_up = 0x8913, 0x8914, 0x1
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sh", b"lo", 0)
        flags = struct.unpack("16sh", fcntl.ioctl(sock, siocgifflags, request))[1]
        fcntl.ioctl(sock, siocsifflags, struct.pack("16sh", b"lo", flags | iff_up))


def outer_netns() -> str:
    """The network namespace of the process that launched us (the pytest side passes it on)."""
    return os.environ.get("LOSSLESS_E2E_OUTER_NETNS", "")


def private_namespace() -> bool:
    """True only inside a namespace whose sole interface is loopback, other than the launcher's."""
    names = sorted(name for _, name in socket.if_nameindex())
    outer = outer_netns()
    return names == ["lo"] and (not outer or os.readlink("/proc/self/ns/net") != outer)


def assert_loopback_only() -> None:
    """Refuse to run anywhere traffic could leave the machine."""
    if not private_namespace():
        names = [name for _, name in socket.if_nameindex()]
        raise SystemExit(f"refusing to run: interfaces {names} (or the launcher's namespace); use `unshare -n`")


def http_json(
    method: str, url: str, *, token: str | None = None, body: Any = None, timeout: float = 10.0
) -> tuple[int, Any]:
    """One HTTP call to a loopback service; returns (status, parsed JSON or text). Status 0: unreachable."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - http to loopback only
    request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 - http to loopback only
            raw = response.read().decode()
            status = int(response.status)
    except urllib.error.HTTPError as error:
        raw, status = error.read().decode(), int(error.code)
    except (urllib.error.URLError, OSError):
        return 0, None
    try:
        return status, json.loads(raw) if raw else None
    except json.JSONDecodeError:
        return status, raw


def wait_until(check: Callable[[], bool], timeout: float, interval: float = 0.5) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(interval)
    return check()


def own_namespace_pids() -> list[int]:
    """Every other process in this network namespace: all of them were started by this driver."""
    if not private_namespace():
        return []  # never touch anything outside a private namespace
    mine = os.readlink("/proc/self/ns/net")
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if os.readlink(entry / "ns" / "net") == mine:
                pids.append(int(entry.name))
    return pids
