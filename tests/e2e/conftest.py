"""The end-to-end run, once per pytest session: ``driver.py`` inside ``unshare -n`` writes one report, and
every ``e2e`` test asserts one scenario on it (``test_e2e_openclaw.py``, ``test_e2e_outages.py``).

The first run installs OpenClaw into a cache (``install.sh``, ~1 min, ~850 MB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("tests.e2e.checks")

from tests.e2e.prerequisites import unavailable  # noqa: E402 - after the rewrite hook, as pytest asks

HERE = Path(__file__).resolve().parent
E2E_SCHEMA = "suite_e2e"  # the run's store on the suite's PostgreSQL pass
Report = dict[str, Any]


def unshare_prefix() -> list[str] | None:
    """The command prefix that gives a private network namespace here, or None when none is permitted."""
    for prefix in (["unshare", "-n"], ["unshare", "-rn"]):
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return prefix
    return None


def install_openclaw(version: str | None = None) -> Path:
    """The install.sh cache: the default one (OpenClaw 2026.9.6), or ``version``'s own beside it."""
    # PYTHON: the pip that bootstraps an npm on a machine without one is this venv's.
    env = {**os.environ, "PYTHON": sys.executable}
    if version is not None:
        default = Path(env.get("LOSSLESS_E2E_CACHE", Path.home() / ".cache" / "openclaw-lossless-e2e"))
        env |= {"LOSSLESS_E2E_OPENCLAW_VERSION": version, "LOSSLESS_E2E_CACHE": f"{default}-{version}"}
    command = ["bash", str(HERE / "install.sh")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1200, env=env, check=False)
    if done.returncode != 0:
        pytest.fail(f"install.sh failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def report(tmp_path_factory: pytest.TempPathFactory, suite_database: str | None) -> Report:
    """The whole run's evidence. On the suite's PostgreSQL pass, the gateway's sidecar (and every CLI the run
    starts) stores into a schema of its own on the suite's server: the run's environment names it, as a user's
    would, and the PostgreSQL server's Unix socket is reachable from inside the private network namespace."""
    return drive(tmp_path_factory, suite_database)


def drive(
    tmp_path_factory: pytest.TempPathFactory,
    suite_database: str | None,
    version: str | None = None,
    only: list[str] | None = None,
) -> Report:
    """One driver run on OpenClaw ``version`` (default: the install.sh pin), of the ``only`` scenarios (default:
    all); its report."""
    prefix = unshare_prefix()
    if prefix is None:
        unavailable(
            "a private network namespace (`unshare -n` or `unshare -rn`) is not permitted here; the e2e needs one"
        )
    mode = os.environ.get("LOSSLESS_E2E_SIDECAR", "real")
    venv_bin = Path(sys.prefix) / "bin"
    if mode == "real" and not (venv_bin / "openclaw-lossless").exists():
        pytest.fail(f"openclaw-lossless is not installed in {venv_bin} (pip install -e .)")
    began = time.monotonic()
    cache = install_openclaw(version)
    installed = round(time.monotonic() - began, 1)
    workdir = tmp_path_factory.mktemp(f"openclaw-e2e-{version}" if version else "openclaw-e2e")
    report_path = workdir / "report.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOSSLESS_DATABASE_")}
    env["LOSSLESS_E2E_OUTER_NETNS"] = os.readlink("/proc/self/ns/net")
    if suite_database is not None:
        env |= {"LOSSLESS_DATABASE_URL": suite_database, "LOSSLESS_DATABASE_SCHEMA": E2E_SCHEMA}
    command = [*prefix, sys.executable, str(HERE / "driver.py"), "--cache", str(cache), "--workdir", str(workdir),
               "--report", str(report_path), "--venv-bin", str(venv_bin), "--sidecar", mode]  # fmt: skip
    if only:
        command += ["--only", ",".join(only)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=1500, env=env, check=False)
    if not report_path.exists():
        pytest.fail(f"the driver wrote no report (rc={done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    data: Report = json.loads(report_path.read_text())
    data["installSeconds"] = installed
    print(f"e2e evidence in {workdir}; install {installed} s; timings {data.get('timings')}")
    if data.get("setupError"):
        pytest.fail(f"setup failed: {data['setupError']}\n{data.get('setupTrace', '')}\nevidence: {workdir}")
    return data
