"""The browser tests' setup, once for this package (closed after its last test): Debian's Chromium, installed
on demand by ``install.sh``; one live sidecar on the real local model with a replayed conversation; and one
headless Chromium driven by Playwright against it.

What a machine lacks (the browser, or root to install it) skips these tests with the reason on a developer's
machine and fails them under ``CI=true`` (``tests/e2e/prerequisites.py``): a green CI run means a real browser
really ran. Everything stays on loopback: the browser is started with its background networking off, and
every request that is not to the sidecar is aborted and recorded (``Visit.strays``), so a page that fetched
an asset from elsewhere would be seen.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.embed.provider import EmbeddingProvider
from tests.conversation import QUESTION, commit_body, conversation
from tests.e2e.prerequisites import running_in_ci, unavailable

try:
    from playwright.sync_api import (
        Browser,
        BrowserContext,
        FloatRect,
        Page,
        Route,
        ViewportSize,
        expect,
        sync_playwright,
    )
except ImportError:  # a venv without the test extras: these tests skip with the reason, the others run
    if running_in_ci():
        raise
    pytest.skip("Playwright is not installed: pip install -e '.[test]'", allow_module_level=True)
from tests.helpers import LiveSidecar, live_sidecar, make_settings

HERE = Path(__file__).resolve().parent
# The pictures land in build/screenshots (ignored by git) unless LOSSLESS_SCREENSHOTS names another folder:
# `make screenshots` points it at docs/screenshots to refresh the docs' pictures on purpose.
SCREENSHOTS = Path(os.environ.get("LOSSLESS_SCREENSHOTS") or HERE.parent.parent / "build" / "screenshots")
TURNS = 30
COMPACTED_AT = 20  # the host compacts after this many turns, and a subagent runs
MAIN_KEY, CHILD_KEY = "agent:main:main", "agent:main:subagent:research"
# A stored message that would run script if the pages did not escape it, and say so on the page's window.
EVIL = (
    "Our deploy note says <script>window.__pwned = 'script'; alert(1)</script> and "
    "<img src=x onerror=\"window.__pwned = 'onerror'\"> rotate the zebra credentials."
)
# A message of its own session, for the test that forgets it (the other tests never see it).
TO_FORGET = "The old printer on floor 3 takes the toner cartridge HP-412X; the spare is in the mail room."
# The launch flags that keep Chromium quiet on a closed machine (no update checks, no sync, no QUIC probes).
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
BLOCKING = ("serious", "critical")
# axe-core as the axe-playwright-python wheel ships it (MPL-2.0), read from the installed package: no network.
AXE = (files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")
VIEWPORT: ViewportSize = {"width": 1100, "height": 800}
SHOT_HEIGHT = 1400


def chromium_path() -> str:
    """Debian's Chromium, installed by ``install.sh`` if missing; skipped (or failed under CI) if it cannot be."""
    done = subprocess.run(["bash", str(HERE / "install.sh")], capture_output=True, text=True, timeout=900, check=False)
    if done.returncode != 0:
        unavailable(f"Chromium for the browser tests is not installed and install.sh could not: {done.stderr[-1500:]}")
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="package")
def browser() -> Iterator[Browser]:
    """One headless Chromium for these tests; Playwright gives it a fresh user-data-dir in a temp dir."""
    executable = chromium_path()
    expect.set_options(timeout=15_000)  # two busy cores in CI: patience, not a timing assert
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="package")
def site(tmp_path_factory: pytest.TempPathFactory, local_embedder: EmbeddingProvider) -> Iterator[LiveSidecar]:
    """A sidecar on the real local model (what users run) holding a replayed conversation, sent through the real
    hook routes as the plugin sends it: turns, a compaction, a subagent's session, one message carrying script,
    all embedded, and one assemble so a recall trace exists."""
    with live_sidecar(make_settings(tmp_path_factory.mktemp("browser") / "state"), local_embedder) as server:
        replay(server)
        server.wait_for_backlog()
        question = {"sessionId": "s-main", "sessionKey": MAIN_KEY, "prompt": QUESTION, "messages": []}
        assert server.post("assemble", question | {"tokenBudget": 8000}).status_code == 200
        yield server


def replay(server: LiveSidecar) -> None:
    def commit(body: dict[str, Any]) -> None:
        assert server.post("commit-turn", body).json()["status"] == "committed"

    turns = conversation(TURNS)
    for turn in turns[:COMPACTED_AT]:
        commit(commit_body(turn))
    compact = {"sessionId": "s-main", "sessionKey": MAIN_KEY, "tokensBefore": 9000, "tokensAfter": 1200, "ok": True}
    summary = "## Decisions\nStaging passwords rotate on Tuesdays; the billing retries stay at three."
    assert server.post("compact", compact | {"summary": summary, "reason": "overflow"}).status_code == 200
    spawn = {"parentSessionKey": MAIN_KEY, "childSessionKey": CHILD_KEY}
    assert server.post("subagent-spawn", spawn).status_code == 200
    for turn in conversation(2, session="s-child", seed=3):
        commit(commit_body(turn, session="s-child", key=CHILD_KEY))
    assert server.post("subagent-ended", {"childSessionKey": CHILD_KEY, "reason": "completed"}).status_code == 200
    for turn in turns[COMPACTED_AT:]:
        commit(commit_body(turn))
    commit({"advancementKey": "notes", "sessionId": "s-notes", "sessionKey": "agent:main:notes",
            "messages": [{"role": "user", "content": TO_FORGET, "timestamp": int(time.time() * 1000)}]})  # fmt: skip
    commit({"advancementKey": "evil", "sessionId": "s-main", "sessionKey": MAIN_KEY,
            "messages": [{"role": "user", "content": EVIL, "timestamp": int(time.time() * 1000)}]})  # fmt: skip


@dataclass
class Visit:
    """A browser context on the sidecar: its page, and every request it tried to send anywhere else."""

    context: BrowserContext
    page: Page
    base: str
    strays: list[str] = field(default_factory=list)

    def go(self, path: str) -> Page:
        response = self.page.goto(self.base + path)
        assert response is not None and response.ok, (path, response and response.status)
        return self.page

    def log_in(self, token: str) -> None:
        self.page.goto(self.base + "/ui/login")
        self.page.get_by_label("Token").fill(token)
        self.page.get_by_role("button", name="Log in").click()
        self.page.wait_for_url(self.base + "/ui")


def open_visit(browser: Browser, base: str, **options: Any) -> Visit:
    """A fresh context (no cookies) whose requests may go to the sidecar only."""
    context = browser.new_context(**({"viewport": VIEWPORT} | options))
    visit = Visit(context, context.new_page(), base)

    def loopback_only(route: Route) -> None:
        if route.request.url.startswith(base + "/"):
            route.continue_()
        else:
            visit.strays.append(route.request.url)
            route.abort()

    context.route("**/*", loopback_only)
    return visit


@pytest.fixture
def fresh(browser: Browser, site: LiveSidecar) -> Iterator[Visit]:
    """A browser that has not logged in."""
    visit = open_visit(browser, site.url)
    yield visit
    visit.context.close()
    assert not visit.strays, f"pages asked for something off the sidecar: {visit.strays}"


@pytest.fixture
def visit(browser: Browser, site: LiveSidecar) -> Iterator[Visit]:
    """A browser logged in through the login form."""
    visit = open_visit(browser, site.url)
    visit.log_in(site.token)
    yield visit
    visit.context.close()
    assert not visit.strays, f"pages asked for something off the sidecar: {visit.strays}"


def screenshot(page: Page, name: str) -> None:
    """The page as the docs show it: <SCREENSHOTS>/<name>.png, overwritten by every run; at most
    ``SHOT_HEIGHT`` pixels of it, so a long table stays a picture one can read."""
    if os.environ.get("LOSSLESS_NO_SCREENSHOTS"):
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    width = page.viewport_size["width"] if page.viewport_size else VIEWPORT["width"]
    height = min(int(page.evaluate("document.documentElement.scrollHeight")), SHOT_HEIGHT)
    clip: FloatRect = {"x": 0, "y": 0, "width": width, "height": height}
    page.screenshot(path=SCREENSHOTS / f"{name}.png", full_page=True, clip=clip, animations="disabled")


def audit(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it stands."""
    page.evaluate(AXE)
    results: dict[str, Any] = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [v for v in results["violations"] if v["impact"] in BLOCKING]


def described(violations: list[dict[str, Any]]) -> str:
    return json.dumps(
        [{"id": v["id"], "help": v["help"], "nodes": [n["html"][:160] for n in v["nodes"][:3]]} for v in violations],
        indent=1,
    )
