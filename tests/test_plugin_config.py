"""The plugin's config schema refuses what would leave memory silently off, and the plugin's globs are Python's.

The host validates ``plugins.entries.lossless.config`` against ``configSchema`` (the manifest's ``config``):
a URL without a scheme, a non-loopback URL without ``allowRemoteSidecar``, out-of-range timeouts, a relative
state dir or a session pattern with a comma must fail there, before the gateway runs. The plugin's session
selection (plugin/sessions.js) is checked against reference cases; this test keeps those cases equal to
``fnmatch.fnmatchcase``, the sidecar's rule.
"""

from __future__ import annotations

import json
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

REPO = Path(__file__).resolve().parents[1]
SCHEMA: dict[str, Any] = json.loads((REPO / "plugin-manifest.json").read_text())["config"]
VALIDATOR = Draft202012Validator(SCHEMA)


def problems(config: dict[str, Any]) -> list[str]:
    return [error.message for error in VALIDATOR.iter_errors(config)]


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"sidecarUrl": "http://127.0.0.1:8377"},
        {"sidecarUrl": "http://localhost:9000/"},
        {"sidecarUrl": "http://[::1]:8377"},
        {"sidecarUrl": "http://127.4.5.6:1"},
        {"sidecarUrl": "https://memory.example.com:8443", "allowRemoteSidecar": True},
        {"stateDir": "/home/me/.openclaw/plugins/lossless", "command": "/opt/lossless/bin/openclaw-lossless"},
        {"timeouts": {"assembleMs": 50, "startMs": 600000}},
        {"excludeSessions": ["agent:*:cron:*", "agent:ops:group-[0-9]*"], "includeSessions": []},
    ],
)
def test_the_schema_accepts_good_configs(config: dict[str, Any]) -> None:
    assert problems(config) == []


@pytest.mark.parametrize(
    "config",
    [
        {"sidecarUrl": "localhost:8377"},  # no scheme: the reported bug
        {"sidecarUrl": "127.0.0.1:8377"},
        {"sidecarUrl": "ftp://127.0.0.1:8377"},
        {"sidecarUrl": "http://127.0.0.1:8377/v1"},
        {"sidecarUrl": "http://user@127.0.0.1:8377"},
        {"sidecarUrl": "http://192.0.2.1:8377"},  # remote without allowRemoteSidecar
        {"sidecarUrl": "http://memory.example.com:8377", "allowRemoteSidecar": False},
        {"sidecarUrl": "http://localhost.example.com:8377"},
        {"allowRemoteSidecar": "yes"},
        {"timeouts": {"assembleMs": 10}},
        {"timeouts": {"commitMs": 10**9}},
        {"timeouts": {"startMs": "20000"}},
        {"timeouts": {"other": 1}},
        {"command": ""},
        {"command": " openclaw-lossless"},
        {"stateDir": "relative/dir"},
        {"stateDir": "~/lossless"},
        {"excludeSessions": "agent:*"},
        {"excludeSessions": ["a,b"]},
        {"includeSessions": [""]},
        {"includeSessions": [1]},
        {"nonsense": True},
    ],
)
def test_the_schema_refuses_bad_configs(config: dict[str, Any]) -> None:
    assert problems(config), config


def test_the_plugins_glob_cases_are_fnmatchcase() -> None:
    cases = json.loads((REPO / "plugin" / "test" / "fixtures" / "glob-cases.json").read_text())["cases"]
    assert len(cases) > 1000
    assert [case for case in cases if fnmatchcase(case[0], case[1]) != case[2]] == []
