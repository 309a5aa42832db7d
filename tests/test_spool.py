"""The plugin's spool through the real app: turns the sidecar did not answer for reach the store exactly once.

The real plugin (Node, ``plugin/test/fixtures/commit-turns.mjs``) commits turns while nothing listens on its
``sidecarUrl``: it keeps them in ``<state>/spool/`` and answers committed. Its next commit that reaches the live
sidecar sends them first, in order; a forget stores them before it selects (``api/spool.py``), so what it
forgets does not come back with a later replay.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from tests.e2e.test_plugin_contract import require_node
from tests.helpers import LiveSidecar, free_port, store_rows

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "plugin" / "test" / "fixtures" / "commit-turns.mjs"
SESSION, KEY = "s-spool", "agent:main:main"
PRIVATE = "The shed padlock combination is quokka-7731."


def turn(key: str, text: str, at: int) -> dict[str, Any]:
    return {
        "advancementKey": key,
        "sessionId": SESSION,
        "sessionKey": KEY,
        "messages": [
            {"role": "user", "content": text, "timestamp": at},
            {"role": "assistant", "content": [{"type": "text", "text": f"Noted: {text}"}], "timestamp": at + 1},
        ],
    }


def commit(server: LiveSidecar, turns: list[dict[str, Any]], *, reachable: bool) -> dict[str, Any]:
    """Commit ``turns`` through the plugin, to the live sidecar or to a port nothing listens on."""
    url = server.url if reachable else f"http://127.0.0.1:{free_port()}"
    config = {"sidecarUrl": url, "stateDir": str(server.settings.state_dir), "autoStart": False}
    done = subprocess.run(
        [require_node(), str(DRIVER)],
        input=json.dumps({"config": config, "turns": turns}),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def spool_files(server: LiveSidecar) -> list[Path]:
    folder = server.settings.state_dir / "spool"
    return sorted(folder.iterdir()) if folder.exists() else []


def stored_texts(server: LiveSidecar) -> list[str]:
    rows = store_rows(server.settings, "SELECT text FROM messages ORDER BY id")
    return [str(row[0]) for row in rows]


def test_spooled_turns_are_stored_once_in_order_when_the_sidecar_answers(sidecar: LiveSidecar) -> None:
    outage = [turn(f"k-{i}", f"Outage note {i}: the drum is marked {i}.", 1_767_225_600_000 + 10 * i) for i in range(3)]
    down = commit(sidecar, [*outage, outage[1]], reachable=False)  # one re-delivered: still one record's worth
    assert down["results"] == [{"status": "committed"}] * 4, down
    assert len(spool_files(sidecar)) == 4
    assert stored_texts(sidecar) == []
    assert not any("drum" in line for line in down["logs"]), down["logs"]  # never the conversation in a log
    after = turn("k-3", "After the outage: all is well.", 1_767_225_700_000)
    up = commit(sidecar, [after], reachable=True)
    assert up["results"] == [{"status": "committed"}], up
    texts = stored_texts(sidecar)
    expected = [m["content"] if isinstance(m["content"], str) else m["content"][0]["text"]
                for t in [*outage, after] for m in t["messages"]]  # fmt: skip
    assert texts == expected  # every turn once, in the order the host ran them
    assert spool_files(sidecar) == []
    keys = store_rows(sidecar.settings, "SELECT advancement_key FROM turns ORDER BY id")
    assert [str(row[0]) for row in keys] == ["k-0", "k-1", "k-2", "k-3"]


def test_a_forget_stores_the_spool_first_so_a_later_replay_brings_nothing_back(sidecar: LiveSidecar) -> None:
    down = commit(sidecar, [turn("f-1", PRIVATE, 1_767_225_600_000)], reachable=False)
    assert down["results"] == [{"status": "committed"}] and len(spool_files(sidecar)) == 1
    planned = sidecar.client.post("/v1/forget", json={"match": "padlock combination", "dryRun": True})
    assert planned.status_code == 200, planned.text
    assert planned.json()["forgotten"] == 2  # the spooled turn, stored first, is in the selection
    done = sidecar.client.post("/v1/forget", json={"match": "padlock combination"})
    assert done.status_code == 200 and done.json()["forgotten"] == 2, done.text
    assert spool_files(sidecar) == []
    # The plugin's next commit replays nothing of it: the spool is empty, and the turn's key is known.
    again = [turn("f-1", PRIVATE, 1_767_225_600_000), turn("f-2", "Unrelated.", 1_767_225_700_000)]
    commit(sidecar, again, reachable=True)
    assert not any("quokka" in text for text in stored_texts(sidecar))
    hits = sidecar.client.get("/v1/search", params={"q": "shed padlock combination"}).json()
    assert not any("quokka" in json.dumps(hit) for hit in hits.get("hits", [])), hits
