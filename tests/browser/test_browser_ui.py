"""The web UI in a real browser: what a person does with it, in headless Chromium against a live sidecar.

``tests/test_ui.py`` checks what the server sends; these check what a browser makes of it: the login form
and its cookie, search and its highlights, a message in its context, the recall trace, a keyboard-only walk,
an axe audit, a phone-sized screen, dark mode, and stored script that must not run. Each main page is also
written to ``build/screenshots/`` (``make screenshots`` refreshes ``docs/screenshots/``).
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Dialog, Page, expect

from tests.browser.conftest import EVIL, TO_FORGET, Visit, audit, described, screenshot
from tests.conversation import FACT
from tests.helpers import LiveSidecar

pytestmark = pytest.mark.browser

FACT_QUERY = "staging database password rotates"


def search(visit: Visit, words: str) -> Page:
    page = visit.go("/ui/search")
    page.get_by_label("Words").fill(words)
    page.get_by_label("Words").press("Enter")
    page.wait_for_url(re.compile(r"/ui/search\?"))
    return page


def test_log_in_with_the_token_and_a_wrong_one_is_refused(fresh: Visit, site: LiveSidecar) -> None:
    page = fresh.page
    page.goto(site.url + "/ui")
    expect(page).to_have_url(site.url + "/ui/login")  # no session: the login form, not the status page
    page.get_by_label("Token").fill(site.token + "x")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_contain_text("not this sidecar's token")
    assert fresh.context.cookies() == []
    page.goto(site.url + "/ui/search")
    expect(page).to_have_url(site.url + "/ui/login")

    page.get_by_label("Token").fill(site.token)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(site.url + "/ui")
    stored = site.client.get("/stats").json()["messages"]
    expect(page.locator("#count-messages")).to_have_text(str(stored))
    (cookie,) = fresh.context.cookies()
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    assert site.token not in cookie["value"] and site.token not in page.url
    assert page.evaluate("document.cookie") == ""  # HttpOnly: the page's own script cannot read it
    screenshot(page, "status")

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(site.url + "/ui/login")
    page.goto(site.url + "/ui")
    expect(page).to_have_url(site.url + "/ui/login")


def test_find_a_fact_by_search_and_see_it_highlighted(visit: Visit) -> None:
    page = search(visit, FACT_QUERY)
    first = page.locator(".hit").first
    expect(first).to_contain_text("rotates every Tuesday at 09:00 UTC")
    marked = {m.lower() for m in first.locator("mark").all_inner_texts()}
    assert {"staging", "database", "password", "rotates"} <= marked
    mark = first.locator("mark").first
    background = mark.evaluate("m => getComputedStyle(m).backgroundColor")
    text_background = first.evaluate("p => getComputedStyle(p).backgroundColor")
    assert background != text_background  # the highlight is seen, not only in the markup
    screenshot(page, "search")


def test_open_a_hit_in_its_context_and_its_original_json(visit: Visit) -> None:
    page = search(visit, FACT_QUERY)
    page.locator(".hit").first.locator(".meta a").first.click()
    expect(page).to_have_url(re.compile(r"/ui/messages/\d+$"))
    current = page.locator('[aria-current="true"]')
    expect(current.locator(".text")).to_have_text(FACT)
    assert page.locator(".entry").count() >= 5  # its neighbours either side
    original = current.locator("details pre")
    expect(original).to_be_hidden()
    current.get_by_text("Original JSON").click()
    expect(original).to_be_visible()
    expect(original).to_contain_text('"role": "user"')
    expect(original).to_contain_text('"timestamp"')
    screenshot(page, "message")


def test_open_what_the_model_saw_for_the_last_assemble(visit: Visit) -> None:
    page = visit.go("/ui")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Recall").click()
    expect(page).to_have_url(re.compile(r"/ui/recall"))
    expect(page.locator("#block")).to_contain_text("rotates every Tuesday")
    kept = page.locator("tr.candidate", has=page.get_by_role("cell", name="kept", exact=True))
    assert kept.count() >= 1
    kept.first.get_by_role("link").click()
    expect(page).to_have_url(re.compile(r"/ui/messages/\d+$"))
    expect(page.locator('[aria-current="true"]')).to_be_visible()
    visit.go("/ui/recall")
    screenshot(page, "recall")


def test_stored_script_is_shown_and_never_runs(visit: Visit) -> None:
    dialogs: list[str] = []

    def on_dialog(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    visit.page.on("dialog", on_dialog)
    page = search(visit, "zebra credentials")
    hit = page.locator(".hit", has_text="zebra")
    expect(hit).to_contain_text("<script>window.__pwned")  # shown as text
    hit.locator(".meta a").first.click()
    expect(page.locator('[aria-current="true"] .text')).to_have_text(EVIL)
    for path in (None, "/ui/search?q=zebra+credentials", "/ui/conversation?session=s-main", "/ui/recall"):
        if path:
            visit.go(path)
        expect(page.locator("main")).to_contain_text("window.__pwned")  # the text is on the page, as text
        assert page.evaluate("typeof window.__pwned") == "undefined", path
        assert page.locator("main img").count() == 0, path
        scripts = page.evaluate("[...document.scripts].map(s => s.src || s.textContent)")
        assert not [s for s in scripts if "__pwned" in s], path
    assert dialogs == []


def test_create_a_snapshot_from_the_page_and_see_it_listed(visit: Visit, site: LiveSidecar) -> None:
    page = visit.go("/ui")
    page.get_by_role("navigation", name="Pages").get_by_role("link", name="Snapshots").click()
    expect(page.locator("#snapshot-row-before-refactor")).to_have_count(0)
    page.get_by_label("Session").fill("s-main")
    page.get_by_label("Name", exact=True).fill("before-refactor")
    page.get_by_role("button", name="Create snapshot").click()
    expect(page).to_have_url(re.compile(r"/ui/snapshots\?created=before-refactor$"))
    expect(page.get_by_role("status")).to_contain_text("before-refactor")
    row = page.locator("#snapshot-row-before-refactor")
    last = site.client.get("/v1/sessions/s-main/messages", params={"last": 1}).json()["messages"][-1]["id"]
    expect(row.get_by_role("link", name=f"msg:{last}")).to_be_visible()
    listed = site.client.get("/v1/snapshots").json()["snapshots"]
    assert "before-refactor" in {s["name"] for s in listed}  # stored, not only shown
    screenshot(page, "snapshots")
    row.get_by_role("link", name="s-main").click()
    expect(page).to_have_url(re.compile(rf"/ui/conversation\?session=s-main&upTo={last}$"))


def test_forget_a_message_from_its_page_and_see_it_gone(visit: Visit, site: LiveSidecar) -> None:
    page = search(visit, "printer toner cartridge")
    page.locator(".hit", has_text=TO_FORGET).locator(".meta a").first.click()
    message_url = page.url
    citation = "msg:" + message_url.rsplit("/", 1)[1]
    page.get_by_role("link", name=f"Forget {citation}…").click()
    expect(page.locator("#forget-count")).to_contain_text("1 message will be removed")
    listed = page.locator(".forget-item")
    expect(listed).to_have_count(1)  # exactly what goes, before it goes
    expect(listed.first).to_contain_text("toner cartridge HP-412X")
    screenshot(page, "forget")
    page.get_by_role("button", name="Forget 1 message for good").click()
    expect(page.get_by_role("status")).to_contain_text("Forgot 1 message")
    assert not (found := audit(page)), described(found)

    page = search(visit, "printer toner cartridge")
    expect(page.locator(".hit", has_text="HP-412X")).to_have_count(0)
    gone = page.goto(message_url)
    assert gone is not None and gone.status == 404
    api = site.client.get("/v1/search", params={"q": "printer toner cartridge HP-412X", "mode": "keyword"})
    assert api.json()["hits"] == []


def test_copy_a_citation_and_the_recover_markdown(visit: Visit, site: LiveSidecar) -> None:
    """The page's own script runs under the strict CSP (script-src 'self') and fills the clipboard."""
    visit.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=site.url)
    page = visit.go("/ui/messages/9")
    page.get_by_role("button", name="Copy msg:9").click()
    expect(page.get_by_role("button", name="Copy msg:9")).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == "msg:9"
    page = visit.go("/ui/conversation?session=s-main&last=100")
    page.get_by_role("button", name="Copy the markdown").click()
    expect(page.get_by_role("button", name="Copy the markdown")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("# Conversation s-main (agent main)")
    assert FACT in copied
