"""The web UI for everyone: keyboard only, an axe audit, a phone-sized screen and dark mode, in real Chromium.

The pages audited are every link in the page navigation (so a page added to the nav is audited too) and the
pages reached from them: a search with hits, a message in its context, a conversation, and the login form.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Visit, audit, described, open_visit, screenshot
from tests.helpers import LiveSidecar

pytestmark = pytest.mark.browser

REACHED = (
    "/ui/search?q=staging+password",
    "/ui/messages/9",
    "/ui/conversation?session=s-main",
    "/ui/timeline?session=s-main&at=40&limit=12",
    "/ui/forget?message=msg:9",  # the confirmation only: nothing goes until its form is posted
)
# Pages whose screenshot a test of what a user does there takes (with the page in the state it shows off).
SHOT_ELSEWHERE = {"status", "search", "messages", "recall", "snapshots", "forget"}
SHOT_NAMES = {"/ui/timeline?session=s-main&at=40&limit=12": "timeline-session"}


def main_pages(page: Page) -> list[str]:
    """Every page the navigation links to, then the pages reached from them."""
    links = page.get_by_role("navigation", name="Pages").get_by_role("link")
    paths = [str(href) for href in links.evaluate_all("links => links.map(a => a.getAttribute('href'))")]
    assert "/ui/search" in paths and "/ui/recall" in paths
    return [*paths, *REACHED]


def focused(page: Page) -> dict[str, Any]:
    """What has the keyboard focus: its tag, name and how its focus is drawn."""
    found: dict[str, Any] = page.evaluate(
        """() => {
            const e = document.activeElement, s = getComputedStyle(e);
            return {tag: e.tagName.toLowerCase(), id: e.id, name: (e.innerText || e.value || e.name || '').trim(),
                    outline: s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0,
                    shadow: s.boxShadow !== 'none'};
        }"""
    )
    return found


def tab_through(page: Page, presses: int) -> list[dict[str, Any]]:
    stops = []
    for _ in range(presses):
        page.keyboard.press("Tab")
        stops.append(focused(page))
    return stops


def tab_until(page: Page, key: str, value: str, presses: int = 30) -> int | None:
    """Press Tab until the focused element's ``key`` is ``value``: how many presses it took, None if never."""
    for press in range(1, presses + 1):
        page.keyboard.press("Tab")
        if focused(page)[key] == value:
            return press
    return None


def assert_no_trap(page: Page, first: str) -> None:
    """Tabbing on from anywhere comes back round to the page's first link: no element keeps the focus."""
    focusable = page.evaluate("document.querySelectorAll('a[href], button, input, select, summary').length")
    later = tab_through(page, 3 * focusable + 3)  # a date field takes one stop per part
    assert any(s["name"] == first for s in later), "the focus never came back round: a keyboard trap"


def test_keyboard_only_reaches_the_nav_and_search_with_visible_focus(visit: Visit) -> None:
    page = visit.go("/ui")
    names = page.get_by_role("navigation", name="Pages").get_by_role("link").all_inner_texts()
    stops = tab_through(page, len(names) + 1)
    assert [s["name"] for s in stops] == [*names, "Log out"]  # the nav in reading order, then logging out
    for stop in stops:
        assert stop["outline"] or stop["shadow"], f"no visible focus on {stop}"

    assert_no_trap(page, names[0])

    page = visit.go("/ui")
    assert tab_until(page, "name", "Search") == 2, "Search is not the second stop"
    page.keyboard.press("Enter")
    expect(page).to_have_url(visit.base + "/ui/search")
    # The search field comes right after the header: its links, then Log out.
    assert tab_until(page, "id", "q") == len(names) + 2, "Tab did not go from the header to the search field"
    assert focused(page)["outline"] or focused(page)["shadow"]
    page.keyboard.type("staging password")
    page.keyboard.press("Enter")
    expect(page).to_have_url(re.compile(r"/ui/search\?q=staging\+password&"))
    expect(page.locator(".hit mark").first).to_be_visible()
    assert_no_trap(page, names[0])  # through the form (a date field has a stop per part) and every hit


def test_log_in_from_the_keyboard_alone(fresh: Visit, site: LiveSidecar) -> None:
    page = fresh.go("/ui/login")
    # Chromium applies autofocus at the page's first rendering, which may come after the load event on a
    # busy machine: wait for it (and fail if it never comes) rather than read the focus at once.
    expect(page.locator("#token")).to_be_focused()  # the field has the focus: type, Enter
    page.keyboard.type(site.token)
    page.keyboard.press("Enter")
    expect(page).to_have_url(site.url + "/ui")


def test_the_original_json_opens_from_the_keyboard(visit: Visit) -> None:
    page = visit.go("/ui/messages/9")
    current = page.locator('[aria-current="true"]')
    current.locator("summary").focus()
    assert focused(page)["outline"] or focused(page)["shadow"]
    page.keyboard.press("Enter")
    expect(current.locator("details pre")).to_be_visible()


def test_axe_finds_no_serious_violation_on_any_main_page(visit: Visit, fresh: Visit) -> None:
    page = visit.go("/ui")
    page.evaluate("document.querySelector('main').append(document.createElement('input'))")
    assert "label" in {v["id"] for v in audit(page)}, "the audit did not see an unlabelled field: is axe running?"
    found = {}
    for path in main_pages(page):
        visit.go(path)
        found[path] = audit(page)
        name = SHOT_NAMES.get(path) or path.removeprefix("/ui").strip("/").split("?")[0].split("/")[0] or "status"
        if name not in SHOT_ELSEWHERE:
            screenshot(page, name)  # the timeline, a conversation, and whatever page the nav gains
    fresh.go("/ui/login")
    found["/ui/login"] = audit(fresh.page)
    bad = {path: described(v) for path, v in found.items() if v}
    assert not bad, "\n".join(f"{path}: {text}" for path, text in bad.items())


def test_a_phone_sized_screen_needs_no_sideways_scrolling(browser: Browser, site: LiveSidecar) -> None:
    phone = open_visit(browser, site.url, viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True)
    try:
        phone.log_in(site.token)
        wide = {}
        for path in main_pages(phone.page):
            page = phone.go(path)
            # clientWidth, not innerWidth: a mobile browser widens its layout viewport to fit what overflows.
            width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            if width[0] > width[1]:
                wide[path] = width
        assert not wide, f"pages wider than the phone's screen (scrollWidth, clientWidth): {wide}"
        phone.go("/ui/search?q=staging+password")
        screenshot(phone.page, "search-phone")
    finally:
        phone.context.close()
    assert not phone.strays


def luminance(css_colour: str) -> float:
    """The relative luminance (0 black .. 1 white) of an ``rgb(...)`` colour."""
    red, green, blue = (int(v) / 255 for v in css_colour[css_colour.index("(") + 1 : -1].split(",")[:3])
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def test_dark_mode_follows_the_system(browser: Browser, site: LiveSidecar) -> None:
    colours = {}
    for scheme in ("light", "dark"):
        visit = open_visit(browser, site.url, color_scheme=scheme)
        try:
            visit.log_in(site.token)
            page = visit.go("/ui")
            colours[scheme] = page.evaluate(
                "() => { const s = getComputedStyle(document.body); return [s.backgroundColor, s.color]; }"
            )
            if scheme == "dark":
                screenshot(page, "status-dark")
                # contrast in the dark palette: the highlights, the panels, the trace table
                for path in ("/ui", "/ui/search?q=staging+password", "/ui/recall"):
                    visit.go(path)
                    assert not (found := audit(page)), f"dark mode, {path}: {described(found)}"
        finally:
            visit.context.close()
    background, text = (luminance(c) for c in colours["dark"])
    assert background < 0.2 < 0.6 < text  # a dark page with light text
    assert luminance(colours["light"][0]) > 0.8
