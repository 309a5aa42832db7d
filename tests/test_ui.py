"""The web UI over real HTTP against the real app: a login of its own, safe in a browser, pages that show the store.

What a user would notice if a protection went: the token in a URL or a page, a page open without logging in,
a form another site can post, a page that can be framed or run inline script, a rebinding page that reaches
the sidecar under a foreign name, a stored ``<script>`` that runs. No real browser here (a later item): these
check what the server sends, which is what a browser acts on.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, db_fingerprint, live_sidecar, make_settings, run_cli_json

PAGES = ("/ui", "/ui/search?q=staging", "/ui/messages/1", "/ui/snapshots")
SCRIPT = "<script>alert(1)</script>"
EVIL = "Our deploy note says <script>alert(1)</script> rotates the zebra credentials."


def browser(server: LiveSidecar) -> httpx.Client:
    """A client that holds cookies like a browser and sends no bearer token."""
    return httpx.Client(base_url=server.url, timeout=30)


def log_in(client: httpx.Client, server: LiveSidecar) -> httpx.Response:
    return client.post("/ui/login", data={"token": server.token}, headers={"Origin": server.url})


def raw_get(server: LiveSidecar, path: str, cookie: str) -> str:
    """A GET sent byte for byte (httpx would resolve the dot segments before sending)."""
    with socket.create_connection(("127.0.0.1", server.settings.port), timeout=30) as conn:
        head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.settings.port}\r\nCookie: {cookie}\r\n"
        conn.sendall((head + "Connection: close\r\n\r\n").encode())
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF field on the page"
    return found.group(1)


@pytest.fixture
def client(sidecar: LiveSidecar) -> Iterator[httpx.Client]:
    with browser(sidecar) as c:
        yield c


@pytest.fixture
def stored(sidecar: LiveSidecar) -> LiveSidecar:
    """Three turns, then one holding a script tag, embedded."""
    for turn in conversation(3):
        assert sidecar.post("commit-turn", commit_body(turn)).status_code == 200
    evil = {"role": "user", "content": EVIL, "timestamp": 1763888400000}
    body = {"advancementKey": "evil", "sessionId": "s-main", "sessionKey": "agent:main:main", "messages": [evil]}
    assert sidecar.post("commit-turn", body).status_code == 200
    sidecar.wait_for_backlog()
    return sidecar


def test_login_sets_an_httponly_strict_cookie_for_ui_that_is_not_the_token(
    stored: LiveSidecar, client: httpx.Client
) -> None:
    form = client.get("/ui/login")
    assert form.status_code == 200
    assert re.search(r'<form method="post" action="/ui/login"', form.text)  # a post: the token is never in a URL
    response = log_in(client, stored)
    assert response.status_code == 303
    assert response.headers["location"] == "/ui"
    cookie = response.headers["set-cookie"]
    attributes = {part.strip().split("=")[0].lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "path", "samesite"} <= attributes
    assert "samesite=strict" in cookie.lower()
    assert "path=/ui;" in cookie.lower() + ";"
    assert stored.token not in cookie
    for path in PAGES:
        page = client.get(path)
        assert page.status_code == 200, path
        assert stored.token not in page.text
        assert stored.token not in str(page.url)
        assert all(stored.token not in v for v in page.headers.values())


def test_pages_send_to_the_login_form_without_a_session(sidecar: LiveSidecar, client: httpx.Client) -> None:
    forged = {"Cookie": f"lossless_ui_{sidecar.settings.port}=not-a-session"}
    bearer = {"Authorization": f"Bearer {sidecar.token}"}  # the API's token is not a UI session
    for path in (*PAGES, "/ui/no-such-page", "/ui/"):
        for headers in ({}, forged, bearer):
            response = client.get(path, headers=headers)
            assert response.status_code == 303, (path, headers)
            assert response.headers["location"] == "/ui/login"
            assert "count-messages" not in response.text


def test_a_ui_session_does_not_open_the_api(stored: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, stored)
    assert client.get("/ui").status_code == 200
    assert client.get("/stats").status_code == 401
    assert client.get("/v1/search", params={"q": "staging"}).status_code == 401
    assert client.get("/uix").status_code == 401  # only /ui and /ui/... are the gate's, not every path like it
    cookie = client.get("/ui").request.headers["cookie"]
    for path in ("/ui/../stats", "/ui/%2e%2e/stats", "/ui/..%2fstats"):  # the prefix must not lead round the token
        answer = raw_get(stored, path, cookie)
        assert answer.startswith(("HTTP/1.1 303", "HTTP/1.1 404")), (path, answer[:40])
        assert '"messages"' not in answer


def test_a_wrong_token_is_refused_and_sets_no_cookie(sidecar: LiveSidecar, client: httpx.Client) -> None:
    for wrong in ("", "wrong", sidecar.token + "x", sidecar.token[:-1], f"Bearer {sidecar.token}"):
        response = client.post("/ui/login", data={"token": wrong}, headers={"Origin": sidecar.url})
        assert response.status_code == 401
        assert "set-cookie" not in response.headers
        assert "not this sidecar&#39;s token" in response.text
    assert client.get("/ui").status_code == 303


def test_a_login_posted_from_another_origin_is_refused(sidecar: LiveSidecar, client: httpx.Client) -> None:
    for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {}, {"Referer": "http://evil.example/"}):
        response = client.post("/ui/login", data={"token": sidecar.token}, headers=headers)
        assert response.status_code == 403, headers
        assert "set-cookie" not in response.headers
    response = client.post("/ui/login", data={"token": sidecar.token}, headers={"Referer": sidecar.url + "/ui/login"})
    assert response.status_code == 303


def test_a_post_without_the_right_csrf_token_or_origin_is_refused_and_changes_nothing(
    stored: LiveSidecar, client: httpx.Client
) -> None:
    log_in(client, stored)
    csrf = csrf_of(client.get("/ui").text)
    before = db_fingerprint(stored.settings)
    own = {"Origin": stored.url}
    refused = [
        ({}, own),
        ({"csrf": ""}, own),
        ({"csrf": "wrong"}, own),
        ({"csrf": csrf + "x"}, own),
        ({"csrf": csrf}, {"Origin": "http://evil.example"}),
        ({"csrf": csrf}, {}),  # neither Origin nor Referer
    ]
    for data, headers in refused:
        response = client.post("/ui/logout", data=data, headers=headers)
        assert response.status_code == 403, (data, headers)
        assert client.get("/ui").status_code == 200  # still logged in: the post changed nothing
    assert db_fingerprint(stored.settings) == before
    response = client.post("/ui/logout", data={"csrf": csrf}, headers=own)
    assert response.status_code == 303
    assert client.get("/ui").status_code == 303  # logged out
    replayed = {"Cookie": response.request.headers["cookie"]}  # the old cookie is dead on the server too
    assert httpx.get(stored.url + "/ui", headers=replayed).status_code == 303


def test_every_ui_answer_forbids_inline_script_and_framing(stored: LiveSidecar, client: httpx.Client) -> None:
    answers = [client.get("/ui"), client.get("/ui/login"), client.post("/ui/logout", data={})]
    log_in(client, stored)
    answers += [client.get(path) for path in (*PAGES, "/ui/static/style.css", "/ui/messages/999999", "/ui/nothing")]
    answers.append(client.get("/ui", headers={"Host": "evil.example"}))
    for response in answers:
        policy = response.headers.get("content-security-policy", "")
        directives = {d.strip().split(" ")[0]: d.strip() for d in policy.split(";")}
        assert directives.get("default-src") == "default-src 'self'", response.url
        assert directives.get("frame-ancestors") == "frame-ancestors 'none'"
        assert "unsafe-inline" not in policy
        assert "unsafe-eval" not in policy
        assert response.headers.get("x-frame-options") == "DENY"
        assert response.headers.get("x-content-type-options") == "nosniff"
        assert response.headers.get("referrer-policy") in ("no-referrer", "same-origin")
    pages = [r for r in answers if r.headers.get("content-type", "").startswith("text/html")]
    assert pages
    for response in pages:
        scripts = re.findall(r"<script\b[^>]*>.*?</script>", response.text, re.I | re.S)
        assert response.text.lower().count("<script") == len(scripts)
        assert set(scripts) <= {'<script src="/ui/static/ui.js" defer></script>'}  # the one file, no inline script
        assert not re.search(r"<[^>]*\son[a-z]+\s*=", response.text, re.I)  # no inline event handler
        assert "style=" not in response.text and "<style" not in response.text


def test_a_foreign_host_name_is_refused(sidecar: LiveSidecar, client: httpx.Client) -> None:
    port = sidecar.settings.port
    for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1.evil.example:{port}", "[::2]", "0.0.0.0"):
        response = client.get("/ui/login", headers={"Host": host})
        assert response.status_code == 403, host
        assert "Log in" not in response.text
        refused = client.post(
            "/ui/login", data={"token": sidecar.token}, headers={"Host": host, "Origin": f"http://{host}"}
        )
        assert refused.status_code == 403
        assert "set-cookie" not in refused.headers
    loopback = (f"127.0.0.1:{port}", f"localhost:{port}", f"LOCALHOST:{port}", f"[::1]:{port}", "localhost")
    tunnelled = (f"localhost:{port + 1}", f"127.0.0.2:{port}")  # an SSH tunnel's local port, all of 127/8
    for host in (*loopback, *tunnelled):
        assert client.get("/ui/login", headers={"Host": host}).status_code == 200, host


def test_allow_remote_serves_the_ui_under_any_name(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state", allow_remote=True)
    with live_sidecar(settings, HashEmbedder()) as server, browser(server) as client:
        host = f"sidecar.lan:{settings.port}"
        assert client.get("/ui/login", headers={"Host": host}).status_code == 200
        login = client.post(
            "/ui/login", data={"token": server.token}, headers={"Host": host, "Origin": f"http://{host}"}
        )
        assert login.status_code == 303


def test_stored_script_is_shown_as_text_in_search_and_on_the_message_page(
    stored: LiveSidecar, client: httpx.Client
) -> None:
    log_in(client, stored)
    escaped = "&lt;script&gt;alert(1)&lt;/script&gt;"
    results = client.get("/ui/search", params={"q": "zebra credentials " + SCRIPT, "mode": "keyword"})
    assert results.status_code == 200
    assert SCRIPT not in results.text
    assert escaped in results.text
    assert "<mark>zebra</mark>" in results.text  # the query's words highlighted, inside escaped text
    assert 'value="zebra credentials &lt;script&gt;' in results.text  # the query echoed escaped too
    citation = re.search(r'href="/ui/messages/(\d+)">msg:\d+</a>', results.text)
    assert citation
    message = client.get(f"/ui/messages/{citation.group(1)}")
    assert message.status_code == 200
    assert SCRIPT not in message.text
    assert escaped in message.text
    assert "Original JSON" in message.text


def test_search_takes_the_clis_filters(stored: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, stored)
    every = client.get("/ui/search", params={"q": "zebra", "mode": "vector", "k": "200"})
    one = client.get("/ui/search", params={"q": "zebra", "mode": "vector", "k": "1"})
    assert every.text.count('class="hit"') > 1
    assert one.text.count('class="hit"') == 1
    users = client.get("/ui/search", params={"q": "zebra", "mode": "vector", "role": "user", "k": "200"})
    roles = re.findall(r'<span class="role">(\w+)</span>', users.text)
    assert set(re.findall(r'<span class="role">(\w+)</span>', every.text)) == {"user", "assistant"}
    assert roles and set(roles) == {"user"}
    none = client.get("/ui/search", params={"q": "zebra", "scope": "agent:nobody", "mode": "keyword"})
    assert none.status_code == 200 and 'class="hit"' not in none.text
    for params in ({"q": "x", "k": "0"}, {"q": "x", "mode": "psychic"}, {"q": "x", "scope": "galaxy"}):
        bad = client.get("/ui/search", params=params)
        assert bad.status_code == 422, params
        assert 'class="error"' in bad.text
    unknown = client.get("/ui/search", params={"q": "x", "scope": "session:nope"})
    assert unknown.status_code == 404
    assert "nope" in unknown.text


def test_the_message_page_shows_its_neighbours_and_the_original(stored: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, stored)
    page = client.get("/ui/messages/3", params={"context": "2"})
    assert page.status_code == 200
    shown = re.findall(r"msg:(\d+)", page.text)
    assert {"1", "2", "3", "4", "5"} <= set(shown)
    assert 'aria-current="true"' in page.text
    assert "&#34;timestamp&#34;" in page.text  # the original message object, as stored
    missing = client.get("/ui/messages/999999")
    assert missing.status_code == 404
    assert "no message msg:999999" in missing.text


def test_the_status_page_shows_the_stores_counts(sidecar: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, sidecar)

    def count(name: str) -> str:
        found = re.search(rf'id="count-{name}">([^<]*)<', client.get("/ui").text)
        assert found, name
        return found.group(1)

    assert count("messages") == "0"
    for turn in conversation(4):
        sidecar.post("commit-turn", commit_body(turn))
    assert (count("messages"), count("turns"), count("sessions")) == ("8", "4", "1")
    page = client.get("/ui").text
    assert re.search(r'id="backlog">\d+<', page)
    assert re.search(r'id="embedder">[^<]*test-hash', page)


def test_the_ui_is_not_in_the_api_schema(sidecar: LiveSidecar) -> None:
    paths = sidecar.client.get("/openapi.json").json()["paths"]
    assert not [p for p in paths if p.startswith("/ui")]


def test_the_snapshots_page_lists_them_with_a_link_to_where_each_ends(
    stored: LiveSidecar, client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    log_in(client, stored)
    assert "No snapshots yet" in client.get("/ui/snapshots").text
    created = run_cli_json(capsys, stored.settings.state_dir, "snapshot", "create", "before-refactor")
    page = client.get("/ui/snapshots").text
    assert "before-refactor" in page
    assert f'href="/ui/messages/{created["lastMessageId"]}"' in page


def test_search_filters_by_time_like_the_cli(stored: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, stored)
    every = {"q": "zebra", "mode": "vector", "k": "200"}
    everything = client.get("/ui/search", params=every).text.count('class="hit"')
    # the script message is dated 2025-11-23; the three turns are from today
    on_the_day = client.get("/ui/search", params=every | {"since": "2025-11-23", "until": "2025-11-23"})
    assert on_the_day.text.count('class="hit"') == 1
    assert "zebra" in on_the_day.text
    later = client.get("/ui/search", params=every | {"since": "2025-11-24"}).text.count('class="hit"')
    assert later == everything - 1
    bad = client.get("/ui/search", params=every | {"until": "next week"})
    assert bad.status_code == 422
    assert "until must be a date" in bad.text


def test_a_conversation_shows_as_recover_prints_it_up_to_a_snapshot(
    stored: LiveSidecar, client: httpx.Client, capsys: pytest.CaptureFixture[str]
) -> None:
    log_in(client, stored)
    page = client.get("/ui/conversation", params={"session": "s-main"})
    assert page.status_code == 200
    assert len(re.findall(r'<li class="entry">', page.text)) == 7  # 3 turns of two messages and the script one
    assert "# Conversation s-main (agent main)" in page.text  # the markdown recover prints, escaped
    assert SCRIPT not in page.text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    snap = run_cli_json(capsys, stored.settings.state_dir, "snapshot", "create", "mid", "--session", "s-main")
    snapshots = client.get("/ui/snapshots").text
    link = re.search(r'href="(/ui/conversation\?session=s-main&amp;upTo=(\d+))"', snapshots)
    assert link and int(link.group(2)) == snap["lastMessageId"]
    assert client.get("/ui/conversation", params={"session": "s-main", "upTo": "2"}).text.count('class="entry"') == 2
    assert client.get("/ui/conversation", params={"session": "s-main", "last": "3"}).text.count('class="entry"') == 3
    assert client.get("/ui/conversation", params={"session": "nope"}).status_code == 404
    for params in ({}, {"session": "s-main", "last": "0"}, {"session": "s-main", "upTo": "msg:x"}):
        assert client.get("/ui/conversation", params=params).status_code == 422, params


def test_the_recall_page_shows_what_the_model_saw_and_why(stored: LiveSidecar, client: httpx.Client) -> None:
    log_in(client, stored)
    assert "No agent has assembled" in client.get("/ui/recall").text
    prompt = "What did the deploy note say about the zebra credentials?"
    body = {"sessionId": "s-other", "sessionKey": "agent:main:other", "prompt": prompt, "messages": []}
    assembled = stored.post("assemble", body | {"tokenBudget": 8000}).json()
    assert "zebra" in assembled["systemPromptAddition"]
    page = client.get("/ui/recall").text
    assert "&lt;recalled-context&gt;" in page  # the block as handed to the host, escaped
    assert SCRIPT not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    rows = re.findall(
        r'<tr class="candidate">\s*<td><a href="/ui/messages/(\d+)">msg:\d+</a></td>\s*<td>(\w+)</td>', page
    )
    kept = {int(i) for i, decision in rows if decision == "kept"}
    assert kept
    assert kept == {item["id"] for item in assembled["recalled"] if item.get("neighbourOf") is None}
    assert client.get("/ui/recall", params={"agent": "nobody"}).status_code == 404
