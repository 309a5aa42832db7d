"""The Dockerfile, built and started as a user would: a first start on a new named volume serves and stores.

Marked ``container`` and left out of ``make test`` (a base image, a build and the model fetch inside it take
several minutes); ``make container-test`` runs it. It uses podman (rootless-capable, no daemon); the base is
``$LOSSLESS_CONTAINER_BASE``, else a Debian 12 image made once with debootstrap from the mirror apt uses
(docs/docker.md). The server listens on the host's loopback only (host network, ``--host 127.0.0.1``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.helpers import free_port

pytestmark = pytest.mark.container
ROOT = Path(__file__).resolve().parents[1]
LOCAL_BASE = "localhost/debian-base:bookworm"
PODMAN = ["podman", "--runtime", "runc"] if shutil.which("runc") else ["podman"]
LIMITS = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=4096:4096"]


def podman(*args: str, timeout: float = 1800) -> str:
    done = subprocess.run([*PODMAN, *args], capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr[-3000:]}"
    return done.stdout.strip()


def base_image() -> str:
    """The image to build on: the one named, else a local Debian 12 made once with debootstrap."""
    named = os.environ.get("LOSSLESS_CONTAINER_BASE")
    if named:
        return named
    if subprocess.run([*PODMAN, "image", "exists", LOCAL_BASE], check=False).returncode == 0:
        return LOCAL_BASE
    if shutil.which("debootstrap") is None:
        pytest.skip("no base image and no debootstrap to make one (apt-get install debootstrap)")
    mirror = os.environ.get("LOSSLESS_DEBIAN_MIRROR", "http://deb.debian.org/debian")
    rootfs = Path(os.environ.get("TMPDIR", "/var/tmp")) / f"lossless-rootfs-{uuid.uuid4().hex[:8]}"
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), mirror], check=True,
                       capture_output=True, timeout=1800)  # fmt: skip
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        subprocess.run([*PODMAN, "import", "-", LOCAL_BASE], stdin=tar.stdout, check=True, capture_output=True)
        tar.wait()
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
    return LOCAL_BASE


def trust_mounts(tmp: Path) -> list[str]:
    """The host's CA bundle lent to the build's pip (some networks reach PyPI through their own CA)."""
    named = (os.environ.get(name) for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE"))
    bundle = next((Path(value) for value in named if value and Path(value).is_file()), None)
    if bundle is None:
        return []
    conf = tmp / "pip.conf"
    conf.write_text("[global]\ncert = /run/host-ca.crt\n", encoding="utf-8")
    return ["-v", f"{bundle}:/run/host-ca.crt:ro", "-v", f"{conf}:/etc/pip.conf:ro"]


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (apt-get install podman runc)")
    tag = f"localhost/openclaw-lossless-test:{uuid.uuid4().hex[:8]}"
    mounts = trust_mounts(tmp_path_factory.mktemp("build"))
    podman("build", *LIMITS, "--network", "host", *mounts, "--build-arg", f"BASE={base_image()}", "-t", tag,
           str(ROOT))  # fmt: skip
    yield tag
    subprocess.run([*PODMAN, "rmi", "-f", tag], capture_output=True, check=False)


def test_a_first_start_on_a_new_volume_serves_and_stores(image: str) -> None:
    name, volume, port = f"lossless-{uuid.uuid4().hex[:8]}", f"lossless-{uuid.uuid4().hex[:8]}", free_port()
    podman("volume", "create", volume)
    try:
        podman("run", "-d", "--name", name, *LIMITS, "--network", "host", "-v", f"{volume}:/data",
               "-e", f"LOSSLESS_PORT={port}", image, "openclaw-lossless", "serve", "--host", "127.0.0.1")  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        health = wait_for_health(url, name)
        assert health["status"] == "ok"
        token = podman("exec", name, "cat", "/data/token")
        turn = {"sessionId": "s-box", "advancementKey": "k1", "messages": [
            {"role": "user", "content": "The boathouse key is under the blue flowerpot."},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted: under the blue flowerpot."}]},
        ]}  # fmt: skip
        headers = {"Authorization": f"Bearer {token}"}
        committed = httpx.post(f"{url}/v1/hooks/commit-turn", json=turn, headers=headers, timeout=30).json()
        assert committed["status"] == "committed" and committed["stored"] == 2
        hits = httpx.get(f"{url}/v1/search", params={"q": "boathouse key", "mode": "keyword"}, headers=headers,
                         timeout=30).json()["hits"]  # fmt: skip
        assert "blue flowerpot" in hits[0]["text"]
        owners = podman("exec", name, "stat", "-c", "%n %u %a", "/data", "/data/lossless.sqlite", "/data/token")
        assert owners.splitlines() == ["/data 10001 700", "/data/lossless.sqlite 10001 600", "/data/token 10001 600"]
        tools = podman("exec", name, "sh", "-c", "for t in gcc cc pip pip3 make; do command -v $t; done; true")
        assert tools == "", f"build tools left in the image: {tools}"
    finally:
        subprocess.run([*PODMAN, "rm", "-f", name], capture_output=True, check=False)
        subprocess.run([*PODMAN, "volume", "rm", "-f", volume], capture_output=True, check=False)


def wait_for_health(url: str, name: str) -> dict[str, object]:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            answer: dict[str, object] = httpx.get(f"{url}/healthz", timeout=2).json()
            return answer
        except (httpx.HTTPError, json.JSONDecodeError):
            time.sleep(0.5)
    logs = subprocess.run([*PODMAN, "logs", name], capture_output=True, text=True, check=False)
    pytest.fail(f"the container never answered /healthz: {logs.stdout[-2000:]} {logs.stderr[-2000:]}")
