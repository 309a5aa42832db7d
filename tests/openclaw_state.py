"""Test support: an OpenClaw state directory as the gateway and ``openclaw plugins install -l`` leave it.

The config is written as JSON5 text (comments, trailing commas, unquoted keys), the way users edit it; the
plugin is linked the way the real install links it (its folder in ``plugins.load.paths``, the slot and an
enabled entry).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import json5
import pytest

from tests.helpers import free_port

REPO = Path(__file__).resolve().parents[1]
PLUGIN_DIR = REPO / "plugin"
OPENCLAW_VARIABLES = ("OPENCLAW_HOME", "OPENCLAW_STATE_DIR", "OPENCLAW_CONFIG_PATH", "OPENCLAW_PROFILE")


def openclaw_env(home: Path, **extra: str) -> dict[str, str]:
    """An environment in which OpenClaw's home is ``home`` and nothing else points elsewhere."""
    return {"HOME": str(home), "OPENCLAW_HOME": str(home), **extra}


def json5_text(value: Any) -> str:
    """``value`` as JSON5 a person would write: a comment, unquoted keys, trailing commas."""
    body = json5.dumps(value, indent=2, quote_keys=False, trailing_commas=True)
    return f"// the gateway's config, as a person edits it\n{body}\n"


def linked_config(plugin_dir: Path = PLUGIN_DIR, /, **plugin_config: Any) -> dict[str, Any]:
    """What ``openclaw plugins install -l`` writes, plus the entry's config."""
    entry: dict[str, Any] = {"enabled": True}
    if plugin_config:
        entry["config"] = plugin_config
    return {
        "plugins": {
            "load": {"paths": [str(plugin_dir)]},
            "entries": {"lossless": entry},
            "slots": {"contextEngine": "lossless"},
        },
        "gateway": {"mode": "local", "bind": "loopback"},
    }


def write_config(state: Path, config: dict[str, Any] | str) -> Path:
    state.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = state / "openclaw.json"
    path.write_text(config if isinstance(config, str) else json5_text(config))
    return path


def plugin_copy(target: Path, version: str) -> Path:
    """A copy of the plugin folder whose package.json says ``version`` (another release's plugin)."""
    shutil.copytree(PLUGIN_DIR, target, ignore=shutil.ignore_patterns("test", "node_modules"))
    package = json.loads((target / "package.json").read_text())
    package["version"] = version
    (target / "package.json").write_text(json.dumps(package))
    return target


def linked_openclaw_home(home: Path, state_dir: Path) -> dict[str, str]:
    """An OpenClaw home with the plugin linked (stateDir ``state_dir``) and nothing listening on its
    sidecarUrl (autoStart on: a note, not a failure), so ``doctor``'s host checks pass; its variables."""
    url = f"http://127.0.0.1:{free_port()}"
    write_config(home / ".openclaw", linked_config(sidecarUrl=url, stateDir=str(state_dir)))
    return {"OPENCLAW_HOME": str(home)}


def use_linked_openclaw(monkeypatch: pytest.MonkeyPatch, home: Path, state_dir: Path) -> None:
    """``linked_openclaw_home``, set in this test's environment."""
    for name in OPENCLAW_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in linked_openclaw_home(home, state_dir).items():
        monkeypatch.setenv(name, value)
