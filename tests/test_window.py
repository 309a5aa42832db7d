"""The recent window, the recall query, and the FTS5 expression built from user text (which must never be
able to speak FTS5 or SQL, whatever it contains)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openclaw_lossless.cli.main import main
from openclaw_lossless.recall.search import MAX_QUERY_TERMS, fts_query
from openclaw_lossless.recall.window import Descriptor, query_text, window_start
from openclaw_lossless.store.sqlite.connection import Connection, Database, open_connection
from openclaw_lossless.store.sqlite.migrations import migrate
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test


def d(role: str, tokens: int, text: str | None = None) -> Descriptor:
    return Descriptor(role=role, key=f"{role}-{tokens}-{text}", tokens=tokens, text=text)


# -- window_start ---------------------------------------------------------------------------------------------


def test_window_is_the_newest_messages_within_budget() -> None:
    history = [d("user", 100), d("assistant", 100), d("user", 100), d("assistant", 100)]
    assert window_start(history, 250) == 2
    assert window_start(history, 300) == 1
    assert window_start(history, 10_000) == 0


def test_window_holds_one_message_even_over_budget() -> None:
    history = [d("user", 10), d("assistant", 5000)]
    assert window_start(history, 100) == 1
    assert window_start([d("user", 5000)], 0) == 0


def test_empty_history_has_an_empty_window() -> None:
    assert window_start([], 1000) == 0


def test_window_never_starts_on_a_tool_result() -> None:
    history = [
        d("user", 50),
        d("assistant", 50),  # the tool call
        d("toolResult", 400),
        d("toolResult", 400),
        d("assistant", 50),
    ]
    # The budget reaches back to the second tool result only: the window grows to keep the call with both.
    assert window_start(history, 460) == 1
    assert window_start(history, 860) == 1
    # Nothing but tool results back to the start: the window starts at the start.
    assert window_start([d("toolResult", 10), d("toolResult", 10)], 10) == 0


@given(
    roles=st.lists(st.sampled_from(["user", "assistant", "toolResult"]), max_size=40),
    tokens=st.lists(st.integers(0, 500), min_size=40, max_size=40),
    budget=st.integers(0, 3000),
)
def test_window_start_properties(roles: list[str], tokens: list[int], budget: int) -> None:
    history = [d(role, cost) for role, cost in zip(roles, tokens, strict=False)]
    n = len(history)
    start = window_start(history, budget)
    if n == 0:
        assert start == 0
        return
    assert 0 <= start < n
    assert start == 0 or history[start].role != "toolResult"
    if start > 0:  # the message before the window would not have fitted
        assert sum(tokens[start - 1 : n]) > budget
    over_budget = sum(tokens[start:n]) > budget
    if over_budget:  # only to keep one message, or to keep a tool call with its results
        assert start == n - 1 or history[start + 1].role == "toolResult"


def test_window_keeps_a_tool_call_with_its_results_over_http(sidecar: LiveSidecar) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "list the files", "timestamp": 1},
        {"role": "assistant", "content": [{"type": "toolCall", "id": "c1", "name": "ls", "arguments": {"p": "/"}}]},
        {"role": "toolResult", "toolName": "ls", "content": [{"type": "text", "text": "x" * 4000}]},
        {"role": "toolResult", "toolName": "ls", "content": [{"type": "text", "text": "y" * 400}]},
        {"role": "assistant", "content": "there are two listings", "timestamp": 5},
    ]
    body = {"sessionId": "s-win", "messages": messages, "tokenBudget": 400, "config": {"windowShare": 0.5}}
    answer = sidecar.post("assemble", body).json()
    assert answer["windowStart"] == 1
    assert answer["messages"] == messages[1:]


def test_window_over_http_counts_tokens_like_the_shim(sidecar: LiveSidecar) -> None:
    # 84 each: 400 ASCII letters at a fifth of a token (token_estimate.py), plus 4
    messages = [{"role": "user", "content": "a" * 400}, {"role": "assistant", "content": "b" * 400}]
    body: dict[str, Any] = {"sessionId": "s-tok", "messages": messages, "config": {"windowShare": 1.0}}
    assert sidecar.post("assemble", body | {"tokenBudget": 168}).json()["windowStart"] == 0
    assert sidecar.post("assemble", body | {"tokenBudget": 167}).json()["windowStart"] == 1


# -- query_text -----------------------------------------------------------------------------------------------


def test_query_is_the_prompt_and_the_last_three_user_texts() -> None:
    window = [
        d("user", 1, "first question about kafka"),
        d("assistant", 1, "assistant answer about redis"),
        d("user", 1, "second about postgres"),
        d("user", 1, "third about nginx"),
        d("toolResult", 1, "tool output about docker"),
        d("user", 1, "fourth about terraform"),
    ]
    query = query_text("current prompt about helm", window)
    assert query.splitlines()[0] == "current prompt about helm"
    assert set(query.splitlines()) == {
        "current prompt about helm",
        "second about postgres",
        "third about nginx",
        "fourth about terraform",
    }


def test_query_without_prompt_or_users_is_empty() -> None:
    assert query_text(None, [d("assistant", 1, "hello")]) == ""
    assert query_text("   ", []) == ""
    assert query_text(None, [d("user", 1, "only user")]) == "only user"


def test_a_turn_embeds_only_the_query_parts_it_has_not_seen(sidecar: LiveSidecar, embedder: HashEmbedder) -> None:
    """The window's user messages were earlier turns' prompts: embedding them again every turn cost ~30 ms of
    the turn on one core. Each part is embedded once and the query vector is the mean of the parts'."""
    history = [
        {"role": "user", "content": "we moved the billing service to the eu-west cluster"},
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "the staging password rotates every tuesday"},
        {"role": "assistant", "content": "noted"},
    ]
    body: dict[str, Any] = {"sessionId": "s-parts", "messages": history, "prompt": "which cluster runs billing?"}
    sidecar.post("assemble", body)
    assert sorted(embedder.texts) == sorted(
        ["which cluster runs billing?", history[0]["content"], history[2]["content"]]
    )
    embedder.texts.clear()
    history += [{"role": "user", "content": "which cluster runs billing?"}, {"role": "assistant", "content": "eu"}]
    sidecar.post("assemble", body | {"messages": history, "prompt": "and who owns the billing cluster?"})
    assert embedder.texts == ["and who owns the billing cluster?"]


def test_trace_reports_the_query_over_http(sidecar: LiveSidecar) -> None:
    messages = [{"role": "user", "content": f"question {i}"} for i in range(5)]
    body = {"sessionId": "s-q", "messages": messages, "prompt": "the prompt", "trace": True}
    query = sidecar.post("assemble", body).json()["trace"]["query"]
    assert set(query.splitlines()) == {"the prompt", "question 4", "question 3", "question 2"}


# -- fts_query ------------------------------------------------------------------------------------------------


def test_stop_words_are_dropped_and_terms_quoted() -> None:
    assert fts_query("What is the deployment schedule for the API?") == '"deployment" OR "schedule" OR "api"'


def test_repeated_words_are_searched_once_and_terms_are_capped() -> None:
    assert fts_query("Deploy deploy DEPLOY staging") == '"deploy" OR "staging"'
    many = " ".join(f"word{i}" for i in range(200))
    expression = fts_query(many)
    assert expression is not None
    assert expression.count(" OR ") == MAX_QUERY_TERMS - 1


@pytest.mark.parametrize("text", ["", "   ", "the and of to is", "🔥🚀🎉", "* ( ) : ^ -", "a b c"])
def test_nothing_to_search_gives_none(text: str) -> None:
    assert fts_query(text) is None


HOSTILE = [
    "zephyr AND deploy OR NOT staging",
    '"unbalanced quote zephyr',
    'zephyr" OR "1"="1',
    "NEAR(zephyr staging, 5)",
    "zeph*",
    "*",
    "text:zephyr",
    "messages_fts:zephyr",
    "{text original}: zephyr",
    '"); DROP TABLE messages; --',
    "'; DELETE FROM messages WHERE 1=1; --",
    "^zephyr",
    "((((zephyr",
    "zephyr)))) OR",
    "-zephyr +staging",
    '"" OR ""',
    "__ zephyr",
    "🔥🚀 zephyr 🎉",
    "🔥🚀🎉",
    "the and of to is",
    "zephyr\x00nul",
    "Zéphyr naïve façade ｚｅｐｈｙｒ",
    "zephyr ² ³ ½",
    "rank:bm25 rowid=1 MATCH zephyr",
    " ".join(["zephyr", "AND", "OR", "NOT", "NEAR"] * 400),
    ("lorem ipsum dolor sit amet zephyr " * 300)[:10_240],
    ("zéphyr ünïcødé 🔥 ｚｅｐｈｙｒ " * 500)[:10_240],  # 10 KB that is ~30 KB once URL-encoded in a GET
    'NEAR("zephyr" "staging", 2) AND text:deploy* OR "a" NOT b',
    "zephyr' UNION SELECT original FROM messages --",
    "%' OR 1=1 --",
    "messages_fts MATCH 'x'",
]


@pytest.fixture
def fts_db(tmp_path: Path) -> Iterator[Connection]:
    db = Database(tmp_path / "fts.sqlite")
    migrate(db)
    db.close()
    conn = open_connection(tmp_path / "fts.sqlite")
    conn.execute("INSERT INTO sessions (id, session_id, agent_id, created_at, last_seen_at) VALUES (1, 's', 'a', 0, 0)")
    conn.execute(
        "INSERT INTO messages (session_rowid, agent_id, role, created_at, stored_at, text, original, content_hash,"
        " window_key, tokens) VALUES (1, 'a', 'user', 0, 0, 'zephyr deploy to staging', '{}', x'00', 'k', 1)"
    )
    try:
        yield conn
    finally:
        conn.close()


def _match(conn: Connection, expression: str) -> list[Any]:
    return list(conn.execute("SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?", (expression,)))


@pytest.mark.parametrize("text", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_text_gives_none_or_a_valid_match(fts_db: Connection, text: str) -> None:
    expression = fts_query(text)
    if expression is None:
        return
    assert re.fullmatch(r'"[^"]+"( OR "[^"]+")*', expression)
    rows = _match(fts_db, expression)
    if "zephyr" in text.lower():
        assert rows == [(1,)]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(text=st.text(max_size=300))
def test_any_text_gives_none_or_a_valid_match(fts_db: Connection, text: str) -> None:
    expression = fts_query(text)
    if expression is not None:
        _match(fts_db, expression)


@pytest.fixture
def unhurried(tmp_path: Path, embedder: HashEmbedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[LiveSidecar]:
    """A sidecar, and a CLI, whose searches have 20 s rather than the turn's 400 ms: a search's first keyword
    query in a new process (a cold server connection, on a loaded machine) may take longer than the turn's
    deadline, and then answers nothing, by design. What is tested here is what hostile text finds."""
    monkeypatch.setenv("LOSSLESS_ASSEMBLE_DEADLINE_MS", "20000")
    with live_sidecar(make_settings(tmp_path / "state", assemble_deadline_ms=20000), embedder) as server:
        yield server


@pytest.mark.parametrize("text", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_search_over_http_answers_a_list(unhurried: LiveSidecar, text: str) -> None:
    sidecar = unhurried
    turn = [{"role": "user", "content": "zephyr deploy to staging", "timestamp": 1767225600000}]
    sidecar.post("commit-turn", {"sessionId": "s-fts", "advancementKey": "t1", "messages": turn})
    for mode in ("keyword", "hybrid"):
        response = sidecar.client.get("/v1/search", params={"q": text, "mode": mode})
        assert response.status_code == 200, response.text
        hits = response.json()["hits"]
        assert isinstance(hits, list)
        if mode == "keyword" and "zephyr" in text.lower():
            assert [hit["text"] for hit in hits] == ["zephyr deploy to staging"]
    assert sidecar.client.get("/stats").json()["messages"] == 1


def test_hostile_prompt_in_assemble_still_recalls(sidecar: LiveSidecar) -> None:
    turn = [{"role": "user", "content": "zephyr deploy to staging", "timestamp": 1767225600000}]
    sidecar.post("commit-turn", {"sessionId": "s-old", "advancementKey": "t1", "messages": turn})
    for prompt in HOSTILE:
        body = {"sessionId": "s-new", "messages": [{"role": "user", "content": "hi"}], "prompt": prompt}
        response = sidecar.post("assemble", body)
        assert response.status_code == 200, (prompt[:40], response.text)
        if "zephyr" in prompt.lower() and len(prompt) < 200:
            assert "zephyr deploy to staging" in response.json()["systemPromptAddition"], prompt


@pytest.mark.parametrize("text", HOSTILE, ids=[f"hostile-{i}" for i in range(len(HOSTILE))])
def test_hostile_search_through_the_cli_answers_hits_or_none(
    unhurried: LiveSidecar, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    """Both ways the CLI searches: through the running sidecar (its port) and on the database file directly."""
    sidecar = unhurried
    turn = [{"role": "user", "content": "zephyr deploy to staging", "timestamp": 1767225600000}]
    sidecar.post("commit-turn", {"sessionId": "s-cli", "advancementKey": "t1", "messages": turn})
    state = str(sidecar.settings.state_dir)
    for port in (str(sidecar.settings.port), "9"):
        for mode in ("keyword", "hybrid"):
            code = main(["search", text, "--mode", mode, "--json", "--state-dir", state, "--port", port])
            out, err = capsys.readouterr()
            assert code == 0, err
            hits = json.loads(out)["hits"]
            if mode == "keyword" and "zephyr" in text.lower():
                assert [hit["text"] for hit in hits] == ["zephyr deploy to staging"]
        assert main(["search", text, "--state-dir", state, "--port", port]) == 0
        assert capsys.readouterr().out.strip()
