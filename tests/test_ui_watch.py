"""The web UI of a sidecar in watch mode, over real HTTP to the real app, as a user who keeps another engine sees it.

No hook is ever called: the turns come only from the host's own transcripts (written the host's way, as in
``test_watch_mode.py``) and the agent's note only from its workspace. What a user would notice: a status page
that does not say the sidecar is watching (or says so when it is not), or a page (status, the sessions, a
timeline, search, the memory files) that does not show what the watch stored.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from openclaw_lossless.transcripts import catchup
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings
from tests.test_catch_up import MAIN_KEY, HostSession, host_messages
from tests.test_history_import import AgentDatabase
from tests.test_ui import browser, log_in
from tests.test_watch_mode import wait_for_messages

TURNS = ("The ferry to Vashon leaves at 7:40 on weekdays.", "The harbour master is called Ines Okafor.")
NOTE = "- The marina gate code changes every first Monday.\n"


@pytest.fixture(autouse=True)
def brisk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Files written this instant count as settled: the same behaviour, without the 2 s re-reads."""
    monkeypatch.setattr(catchup, "SETTLE_S", 0.0)


@pytest.fixture
def watching(tmp_path: Path) -> Iterator[LiveSidecar]:
    """``serve --watch`` on a host state dir whose agent keeps a ``MEMORY.md`` in its default workspace."""
    settings = make_settings(tmp_path / "state", watch=True, watch_interval_s=0.1)
    workspace = settings.openclaw_state / "workspace"
    workspace.mkdir(parents=True)
    (workspace / "MEMORY.md").write_text(f"# Long-term memory\n\n{NOTE}")
    with live_sidecar(settings, HashEmbedder()) as server:
        yield server


@pytest.fixture
def client(watching: LiveSidecar) -> Iterator[httpx.Client]:
    with browser(watching) as c:
        log_in(c, watching)
        yield c


def shown(client: httpx.Client, path: str, **params: str) -> str:
    page = client.get(path, params=params)
    assert page.status_code == 200, (path, page.text[-1500:])
    return page.text


def test_every_page_shows_the_watched_turns_and_the_status_says_watch(
    watching: LiveSidecar, client: httpx.Client
) -> None:
    host = AgentDatabase(watching.settings.openclaw_state)
    try:
        session = HostSession(host)
        for text in TURNS:
            session.turn(text)
        recorded = len(host_messages(host, session.session_id))
        wait_for_messages(watching, session.session_id, recorded)
    finally:
        host.close()
    status = shown(client, "/ui")
    assert re.search(r'<strong id="mode-name">watch</strong>', status), status[:3000]
    assert "every turn OpenClaw records is stored from its transcripts" in status
    # Counted: what the host recorded, and the note's chunks (stored as messages of their own kind).
    chunks = sum(f["chunks"] for f in watching.client.get("/v1/memory-files").json()["files"])
    assert chunks and f'<dd id="count-messages">{recorded + chunks}</dd>' in status, status[:3000]
    sessions = shown(client, "/ui/timeline")
    assert session.session_id in sessions and MAIN_KEY in sessions
    timeline = shown(client, "/ui/timeline", session=session.session_id)
    for text in TURNS:
        assert text in timeline, text
    assert "Answer 2." in timeline  # the host's reply too, not only what the user said
    hits = shown(client, "/ui/search", q="harbour master", mode="keyword")
    assert "<mark>harbour</mark> <mark>master</mark> is called Ines Okafor." in hits, hits[-3000:]
    memory = shown(client, "/ui/memory")
    assert "file:MEMORY.md#L3" in memory and NOTE.strip("- \n") in memory


def test_a_sidecar_not_watching_says_engine(sidecar: LiveSidecar) -> None:
    with browser(sidecar) as client:
        log_in(client, sidecar)
        status = shown(client, "/ui")
    assert re.search(r'<strong id="mode-name">engine</strong>', status), status[:3000]
