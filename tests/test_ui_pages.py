"""The web UI's timelines, compactions, snapshot form, forgetting and copy button, over real HTTP to the real app.

What a user would notice: a compaction, a snapshot or a ``/new`` drawn somewhere else than where it happened, a
subagent that cannot be reached from its parent (or back), a page that loads the whole session or skips
messages between pages, a form that changes the store without its CSRF token or on bad input, a forget that
removes more (or less) than its confirmation listed, a stored ``<script>`` that runs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.helpers import LiveSidecar, db_fingerprint
from tests.test_ui import browser, csrf_of, log_in

SCRIPT = "<script>alert(1)</script>"
BEGIN = time.time() - 3 * 86400  # messages dated in the past, one every ten seconds; events happen now


def turn(server: LiveSidecar, session: str, key: str, n: int, user: str | None = None) -> None:
    """One user/assistant turn in ``session``: two messages, dated in order."""
    at = int((BEGIN + n * 20) * 1000)
    body = {
        "advancementKey": f"{session}:turn:{n}",
        "sessionId": session,
        "sessionKey": key,
        "messages": [
            {"role": "user", "content": user or f"Question {n} about the quarterly zebra roadmap", "timestamp": at},
            {"role": "assistant", "content": [{"type": "text", "text": f"Answer {n}"}], "timestamp": at + 10_000},
        ],
    }
    assert server.post("commit-turn", body).status_code == 200


def ids_on(page: str) -> list[int]:
    return [int(i) for i in re.findall(r'<li class="entry" id="msg-(\d+)">', page)]


def order_of(page: str, *markers: str) -> list[int]:
    """Where each marker first appears on the page (-1: absent)."""
    return [page.find(marker) for marker in markers]


@pytest.fixture
def client(sidecar: LiveSidecar) -> Iterator[httpx.Client]:
    with browser(sidecar) as c:
        log_in(c, sidecar)
        yield c


@pytest.fixture
def story(sidecar: LiveSidecar, client: httpx.Client) -> dict[str, Any]:
    """Session s-one: three turns, a compaction, a named snapshot, a turn, a subagent spawned (which works in
    s-child and ends), then a /new that begins s-two under the same key."""
    key, child_key = "agent:main:main", "agent:main:subagent:abc"
    for n in (1, 2, 3):
        turn(sidecar, "s-one", key, n)
    compact = {"sessionId": "s-one", "sessionKey": key, "compacted": True, "tokensBefore": 9000, "tokensAfter": 900}
    compaction = sidecar.post("compact", compact).json()
    sidecar.sidecar.ingest.snapshot_create("mid", "s-one")  # what the CLI's snapshot create calls
    turn(sidecar, "s-one", key, 4, user=f"Deploy note: {SCRIPT} rotates the zebra keys")
    spawn = {"parentSessionKey": key, "childSessionKey": child_key, "contextMode": "isolated"}
    assert sidecar.post("subagent-spawn", spawn).status_code == 200
    turn(sidecar, "s-child", child_key, 5)
    assert sidecar.post("subagent-ended", {"childSessionKey": child_key, "reason": "completed"}).status_code == 200
    turn(sidecar, "s-two", key, 6)
    return {"compaction": compaction}


def test_the_timeline_draws_compactions_snapshots_spawns_and_resets_where_they_happened(
    sidecar: LiveSidecar, client: httpx.Client, story: dict[str, Any]
) -> None:
    page = client.get("/ui/timeline", params={"session": "s-one"})
    assert page.status_code == 200
    text = page.text
    assert ids_on(text) == [1, 2, 3, 4, 5, 6, 7, 8, 11]  # 11: the child's answer copied back as an outcome
    compaction = f'id="compaction-{story["compaction"]["compactionId"]}"'
    markers = ['id="msg-6"', compaction, 'id="snapshot-mid"', 'id="msg-7"', 'id="msg-8"', "event-spawn"]
    markers.append('id="reset-after"')
    positions = order_of(text, *markers)
    assert -1 not in positions, dict(zip(markers, positions, strict=True))
    assert positions == sorted(positions)
    assert "pre-compaction-" in text
    assert 'id="reset-before"' not in text  # s-one was the key's first session
    spawn = re.search(r'<a href="(/ui/timeline\?session=[^"]+)" class="child-link">agent:main:subagent:abc</a>', text)
    assert spawn
    child = client.get(spawn.group(1).replace("&amp;", "&"))
    assert child.status_code == 200
    assert "Timeline s-child" in child.text
    assert re.search(r'id="parent-link">Subagent of <a href="/ui/timeline\?session=s-one">', child.text)
    reset = re.search(r'id="reset-after">.*?href="(/ui/timeline\?session=s-two)"', text, re.S)
    assert reset
    after = client.get(reset.group(1)).text
    assert re.search(r'id="reset-before">.*?href="/ui/timeline\?session=s-one"', after, re.S)
    assert ids_on(after) == [12, 13]


def test_stored_script_is_escaped_on_the_timeline(
    sidecar: LiveSidecar, story: dict[str, Any], client: httpx.Client
) -> None:
    text = client.get("/ui/timeline", params={"session": "s-one"}).text
    assert SCRIPT not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    odd = 's<b>"&1 /?#'  # a session id is any printable text: escaped in the page, encoded in its links
    turn(sidecar, odd, "agent:main:odd", 7)
    index = client.get("/ui/timeline").text
    assert "<b>" not in index
    shown = re.escape("s&lt;b&gt;&#34;&amp;1 /?#")
    link = re.search(rf'href="(/ui/timeline\?session=s%3Cb[^"]*)" class="session-link">{shown}<', index)
    assert link
    page = client.get(link.group(1).replace("&amp;", "&"))
    assert page.status_code == 200
    assert "Timeline s&lt;b&gt;&#34;&amp;1 /?#" in page.text
    older = client.get("/ui/timeline", params={"session": odd, "limit": "1"}).text
    assert re.search(r'href="/ui/timeline\?session=s%3Cb%3E%22%261%20%2F%3F%23&amp;before=\d+&amp;limit=1"', older)


def test_the_index_lists_agents_and_sessions_with_counts(story: dict[str, Any], client: httpx.Client) -> None:
    text = client.get("/ui/timeline").text
    rows = re.findall(r'class="session-link">([^<]+)</a></td>\s*<td>[^<]*</td>\s*<td class="count">(\d+)</td>', text)
    assert dict(rows) == {"s-one": "9", "s-child": "2", "s-two": "2"}
    assert 'id="agent-main"' in text
    assert "subagent of agent:main:main" in text
    assert 'class="session-link"' not in client.get("/ui/timeline", params={"agent": "nobody"}).text


def test_the_timeline_pages_through_a_long_session_without_gaps(sidecar: LiveSidecar, client: httpx.Client) -> None:
    for n in range(1, 31):
        turn(sidecar, "s-long", "agent:main:long", n)
        if n == 15:  # after msg 30
            sidecar.post("compact", {"sessionId": "s-long", "sessionKey": "agent:main:long", "compacted": True})
    seen: list[int] = []
    pages: list[str] = []
    url: str | None = "/ui/timeline?session=s-long&limit=25"
    while url:
        page = client.get(url)
        assert page.status_code == 200
        pages.append(page.text)
        shown = ids_on(page.text)
        assert 0 < len(shown) <= 25
        seen = shown + seen
        older = re.search(r'href="(/ui/timeline\?[^"]*before=\d+[^"]*)" rel="prev"', page.text)
        url = older.group(1).replace("&amp;", "&") if older else None
    assert seen == list(range(1, 61))  # every message once, in order, over three pages
    assert len(pages) == 3
    assert sum(p.count('class="event event-compaction"') for p in pages) == 1  # drawn once, on its page
    middle = pages[1]
    assert order_of(middle, 'id="msg-30"', "event-compaction", 'id="msg-31"') == sorted(
        order_of(middle, 'id="msg-30"', "event-compaction", 'id="msg-31"')
    )
    newer = re.search(r'href="(/ui/timeline\?[^"]*after=(\d+)[^"]*)" rel="next"', pages[2])
    assert newer and newer.group(2) == "10"
    assert ids_on(client.get(newer.group(1).replace("&amp;", "&")).text) == list(range(11, 36))
    around = ids_on(client.get("/ui/timeline", params={"session": "s-long", "at": "40", "limit": "10"}).text)
    assert around == list(range(35, 45))
    for params in ({"before": "x"}, {"limit": "0"}, {"before": "5", "after": "2"}):
        bad = client.get("/ui/timeline", params={"session": "s-long"} | params)
        assert bad.status_code == 422, params
    assert client.get("/ui/timeline", params={"session": "nope"}).status_code == 404


def test_timelines_are_linked_from_messages_hits_and_conversations(story: dict[str, Any], client: httpx.Client) -> None:
    assert 'href="/ui/timeline"' in client.get("/ui").text  # the nav
    message = client.get("/ui/messages/3").text
    assert 'href="/ui/timeline?session=s-one&amp;at=3#msg-3"' in message
    hits = client.get("/ui/search", params={"q": "zebra", "mode": "keyword"}).text
    assert re.search(r'href="/ui/timeline\?session=s-one&amp;at=\d+#msg-\d+"', hits)
    assert 'href="/ui/timeline?session=s-one"' in client.get("/ui/conversation", params={"session": "s-one"}).text
    target = client.get("/ui/timeline", params={"session": "s-one", "at": "3"}).text
    assert 'id="msg-3"' in target


def test_the_compactions_page_lists_each_with_its_status_snapshot_and_recover_link(
    sidecar: LiveSidecar, client: httpx.Client, story: dict[str, Any]
) -> None:
    failed = {"sessionId": "s-two", "sessionKey": "agent:main:main", "compacted": False, "ok": False}
    failed_id = sidecar.post("compact", failed | {"reason": "model <b>timeout</b>"}).json()["compactionId"]
    done_id = story["compaction"]["compactionId"]
    page = client.get("/ui/compactions").text
    rows = dict(re.findall(r'id="compaction-row-(\d+)">(.*?)</tr>', page, re.S))
    assert set(rows) == {str(done_id), str(failed_id)}
    done, fail = rows[str(done_id)], rows[str(failed_id)]
    assert "status-compacted" in done and f"pre-compaction-{done_id}" in done
    assert "status-failed" in fail and "model &lt;b&gt;timeout&lt;/b&gt;" in fail
    recover = re.search(r'href="(/ui/conversation\?session=s-one&amp;upTo=(\d+))" class="recover-link"', done)
    assert recover and recover.group(2) == "6"  # the last message before the compaction
    conversation = client.get(recover.group(1).replace("&amp;", "&")).text
    assert conversation.count('class="entry"') == 6
    assert "# Conversation s-one (agent main)" in conversation
    only_failed = client.get("/ui/compactions", params={"status": "failed"}).text
    assert re.findall(r'id="compaction-row-(\d+)"', only_failed) == [str(failed_id)]
    assert client.get("/ui/compactions", params={"status": "exploded"}).status_code == 422
    assert 'href="/ui/compactions"' in client.get("/ui").text


def test_a_snapshot_named_in_the_form_appears_and_bad_input_changes_nothing(
    sidecar: LiveSidecar, client: httpx.Client, story: dict[str, Any]
) -> None:
    own = {"Origin": sidecar.url}
    csrf = csrf_of(client.get("/ui/snapshots").text)
    made = client.post("/ui/snapshots", data={"csrf": csrf, "session": "s-one", "name": "before-lunch"}, headers=own)
    assert made.status_code == 303
    listed = client.get(made.headers["location"]).text
    row = re.search(r'id="snapshot-row-before-lunch">(.*?)</tr>', listed, re.S)
    assert row and 'href="/ui/messages/11"' in row.group(1)  # s-one's last message now
    assert 'id="snapshot-created"' in listed
    timeline = client.get("/ui/timeline", params={"session": "s-one"}).text
    assert order_of(timeline, 'id="msg-11"', 'id="snapshot-before-lunch"') == sorted(
        order_of(timeline, 'id="msg-11"', 'id="snapshot-before-lunch"')
    )
    before = db_fingerprint(sidecar.settings)
    refused = [
        ({"csrf": csrf, "session": "nope", "name": "x1"}, own, 404),
        ({"csrf": csrf, "session": "s-one", "name": "bad name!"}, own, 422),
        ({"csrf": csrf, "session": "s-one", "name": "before-lunch"}, own, 422),  # never overwritten
        ({"csrf": csrf, "session": "", "name": "x2"}, own, 422),
        ({"session": "s-one", "name": "x3"}, own, 403),  # no CSRF token
        ({"csrf": csrf, "session": "s-one", "name": "x4"}, {"Origin": "http://evil.example"}, 403),
    ]
    for data, headers, status in refused:
        answer = client.post("/ui/snapshots", data=data, headers=headers)
        assert answer.status_code == status, data
        assert "Cannot show that" in answer.text or status == 403
    assert db_fingerprint(sidecar.settings) == before


def hits(client: httpx.Client, query: str, scope: str = "all") -> list[int]:
    page = client.get("/ui/search", params={"q": query, "mode": "keyword", "scope": scope, "k": "200"}).text
    return [int(i) for i in re.findall(r'<a href="/ui/messages/(\d+)">msg:\d+</a>', page)]


def test_forgetting_a_message_lists_exactly_what_goes_and_then_it_is_gone(
    sidecar: LiveSidecar, client: httpx.Client, story: dict[str, Any]
) -> None:
    message = client.get("/ui/messages/10").text  # the child's answer, copied into s-one as msg:11
    link = re.search(r'href="(/ui/forget\?message=msg:10)" id="forget-message"', message)
    assert link
    confirm = client.get(link.group(1))
    assert confirm.status_code == 200
    assert re.findall(r'class="forget-item" id="forget-(\d+)"', confirm.text) == ["10", "11"]
    assert "<strong>2 messages</strong> will be removed" in confirm.text
    assert {10, 11} <= set(hits(client, "Answer 5"))
    before = db_fingerprint(sidecar.settings)
    form = {"csrf": csrf_of(confirm.text), "message": "msg:10", "count": "2"}
    own = {"Origin": sidecar.url}
    for data, headers, status in (
        ({k: v for k, v in form.items() if k != "csrf"}, own, 403),
        (form | {"csrf": "forged"}, own, 403),
        (form, {"Origin": "http://evil.example"}, 403),
        (form | {"count": "1"}, own, 409),  # not what the page showed: shown again, nothing forgotten
    ):
        assert client.post("/ui/forget", data=data, headers=headers).status_code == status, data
    assert db_fingerprint(sidecar.settings) == before
    done = client.post("/ui/forget", data=form, headers=own)
    assert done.status_code == 200
    assert "Forgot 2 messages" in done.text
    assert not {10, 11} & set(hits(client, "Answer 5"))
    assert client.get("/ui/messages/10").status_code == 404
    assert 11 not in ids_on(client.get("/ui/timeline", params={"session": "s-one"}).text)
    assert client.get(link.group(1)).status_code == 404  # nothing left to forget


def test_forgetting_a_session_shows_its_count_and_ends_and_takes_only_it(
    sidecar: LiveSidecar, client: httpx.Client
) -> None:
    for n in range(1, 21):
        turn(sidecar, "s-big", "agent:main:big", n)
    turn(sidecar, "s-keep", "agent:main:keep", 1)
    timeline = client.get("/ui/timeline", params={"session": "s-big"}).text
    link = re.search(r'href="(/ui/forget\?session=s-big)" id="forget-session"', timeline)
    assert link
    confirm = client.get(link.group(1)).text
    assert "<strong>40 messages</strong>" in confirm
    listed = [int(i) for i in re.findall(r'class="forget-item" id="forget-(\d+)"', confirm)]
    assert listed == [1, 2, 3, 4, 5, 36, 37, 38, 39, 40]
    assert "and 30 more" in confirm
    assert len(hits(client, "zebra", "session:s-big")) == 20
    form = {"csrf": csrf_of(confirm), "session": "s-big", "count": "40"}
    turn(sidecar, "s-big", "agent:main:big", 21)  # the session moves on after the page was shown
    changed = client.post("/ui/forget", data=form, headers={"Origin": sidecar.url})
    assert changed.status_code == 409
    assert "<strong>42 messages</strong>" in changed.text
    assert len(hits(client, "zebra", "session:s-big")) == 21  # nothing went
    done = client.post("/ui/forget", data=form | {"count": "42"}, headers={"Origin": sidecar.url})
    assert "Forgot 42 messages" in done.text
    assert hits(client, "zebra", "session:s-big") == []
    assert ids_on(client.get("/ui/timeline", params={"session": "s-keep"}).text) == [41, 42]
    for params in ({}, {"message": "msg:1", "session": "s-keep"}, {"message": "ten"}):
        assert client.get("/ui/forget", params=params).status_code == 422, params
    assert client.get("/ui/forget", params={"session": "nope"}).status_code == 404


def test_the_copy_button_script_is_one_static_file_and_pages_mark_what_to_copy(
    sidecar: LiveSidecar, client: httpx.Client, story: dict[str, Any]
) -> None:
    script = client.get("/ui/static/ui.js")
    assert script.status_code == 200
    assert "javascript" in script.headers["content-type"]
    assert "navigator.clipboard" in script.text and "selectNodeContents" in script.text  # the fallback: select
    assert "eval(" not in script.text and "innerHTML" not in script.text
    conversation = client.get("/ui/conversation", params={"session": "s-one"}).text
    assert '<script src="/ui/static/ui.js" defer></script>' in conversation
    assert 'data-copy-target="markdown" data-copy-label="Copy the markdown"' in conversation
    assert '<pre id="markdown">' in conversation  # the markdown itself, to select by hand without the script
    assert 'data-copy="msg:3"' in conversation
    assert 'data-copy="msg:3"' in client.get("/ui/timeline", params={"session": "s-one"}).text
    assert 'data-copy="msg:3"' in client.get("/ui/messages/3").text
