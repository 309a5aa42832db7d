"""Keyword search finds a word inside text written without spaces, on every way a user searches, both backends.

Messages in Chinese, Japanese, Korean (particles attached), Thai, German and English are committed through a
live sidecar; then a word that is only part of a run (``北京`` in ``我下周要去北京出差``, ``田中`` in
``明日は田中さんと``, ``김민수`` in ``김민수예요``) is looked up by keyword over HTTP, the CLI, the UI and
MCP, and must come back with its message first. Text with no such run gains nothing in the index (its
ranking stays as it was).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp_types import CallToolResult

from openclaw_lossless.capture.grams import gram_text, query_words
from openclaw_lossless.recall.scoring import Candidate, relevance, score
from openclaw_lossless.recall.search import fts_query, pair_coverage
from openclaw_lossless.recall.search import query_terms as query_words_of
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings, run_cli_json, store_rows
from tests.test_mcp_server import server_params, structured, with_client
from tests.test_ui import browser, log_in

MESSAGES = {
    "zh": "我下周要去北京出差，住在王府井附近的酒店。",
    "ja": "明日は田中さんと新宿で会議があります。",
    "ko": "우리 팀장님 이름은 김민수예요.",
    "th": "พรุ่งนี้ผมจะไปเชียงใหม่กับครอบครัว",
    "de": "Das Treffen mit Herrn Albers ist am Donnerstag.",
    "en": "The staging database password rotates every Monday.",
    "zh2": "北方的冬天很冷，京剧很好看。",  # 北 and 京 apart: holds neither 北京 nor its pair
}
# A word asked for, and the message it is inside of
WORDS = {
    "北京": "zh",
    "出差": "zh",
    "王府井": "zh",
    "田中": "ja",
    "新宿": "ja",
    "김민수": "ko",
    "เชียงใหม่": "th",
    "Albers": "de",
}


def fill(server: LiveSidecar) -> None:
    messages = [
        {"role": "user", "content": text, "timestamp": 1_767_225_600_000 + i * 1000}
        for i, text in enumerate(MESSAGES.values())
    ]
    body = {"sessionId": "s-lang", "advancementKey": "t-lang", "messages": messages}
    assert server.post("commit-turn", body).json()["status"] == "committed"


def first_texts(hits: list[dict[str, object]], key: str) -> list[str]:
    return [str(hit[key]) for hit in hits]


def test_pairs_of_unspaced_runs_and_nothing_for_spaced_text() -> None:
    assert gram_text(MESSAGES["en"]) is None and gram_text(MESSAGES["de"]) is None
    held = str(gram_text(MESSAGES["zh"])).split()
    assert {"北京", "出差", "王府", "府井"} <= set(held) and "，" not in "".join(held)
    assert "iPhone" in str(gram_text("我的iPhone手机")).split()  # a mixed word's Latin part, for a query of it alone
    # The query side makes the same pairs; a spaced query is its words as before; one character is no pair
    assert query_words("王府井") == ["王府", "府井"] and query_words("Herr Albers") == ["Herr", "Albers"]
    assert fts_query("京") is None and fts_query("北京") == '"北京"'
    assert set(query_words("김민수")) <= set(str(gram_text(MESSAGES["ko"])).split())


def test_a_word_inside_unspaced_text_is_found_over_http_cli_ui_and_mcp(
    sidecar: LiveSidecar, capsys: pytest.CaptureFixture[str]
) -> None:
    fill(sidecar)
    for word, lang in WORDS.items():
        answer = sidecar.client.get("/v1/search", params={"q": word, "mode": "keyword", "k": 5}).json()
        assert first_texts(answer["hits"], "text")[:1] == [MESSAGES[lang]], word
    # the chars of 北京 apart, in another message, do not make it a match; an absent word finds nothing
    answer = sidecar.client.get("/v1/search", params={"q": "北京", "mode": "keyword", "k": 5}).json()
    assert MESSAGES["zh2"] not in first_texts(answer["hits"], "text")
    assert sidecar.client.get("/v1/search", params={"q": "上海", "mode": "keyword"}).json()["hits"] == []

    state = sidecar.settings.state_dir
    for word in ("北京", "田中"):
        data = run_cli_json(capsys, state, "search", word, "--mode", "keyword", "-k", "3")
        assert first_texts(data["hits"], "text")[:1] == [MESSAGES[WORDS[word]]], word

    with browser(sidecar) as client:
        assert log_in(client, sidecar).status_code < 400
        page = client.get("/ui/search", params={"q": "田中", "mode": "keyword"}).text
        assert MESSAGES["ja"] in page and MESSAGES["zh"] not in page
        page = client.get("/ui/search", params={"q": "北京", "mode": "keyword"}).text
        assert MESSAGES["zh"] in page and MESSAGES["ja"] not in page

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [await session.call_tool("memory_search", {"query": w, "mode": "keyword"}) for w in ("北京", "田中")]

    zh, ja = with_client(server_params(sidecar.settings), work)
    assert first_texts(structured(zh)["hits"], "snippet")[:1] == [MESSAGES["zh"]]
    assert first_texts(structured(ja)["hits"], "snippet")[:1] == [MESSAGES["ja"]]


def test_spaced_text_adds_nothing_to_the_index(sidecar: LiveSidecar) -> None:
    fill(sidecar)
    paired = store_rows(sidecar.settings, "SELECT text FROM messages WHERE grams IS NOT NULL")
    assert {row[0] for row in paired} == {MESSAGES[k] for k in ("zh", "ja", "ko", "th", "zh2")}


RELEASE_STORE = Path(__file__).parent / "fixtures" / "store-release-unspaced-text.sqlite"


@pytest.mark.sqlite_only
def test_a_store_written_by_the_release_before_gains_pairs_through_its_migration(
    tmp_path: Path, embedder: HashEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    """The fixture store (tests/fixtures/README.md) was written by the release before m011: its index holds
    each Chinese and Japanese sentence as one token. Opened by this version, m011 queues them (``/stats``
    shows it) and the backfill pairs them (the server's background thread, run here by hand; a real process
    killed half-way: ``test_keyword_pairs_backfill.py``), with its progress in the log; a word inside them is
    then found, the Latin words as before."""
    settings = make_settings(tmp_path / "state")
    settings.state_dir.mkdir(parents=True)
    shutil.copy(RELEASE_STORE, settings.database_path)
    with caplog.at_level("INFO"), live_sidecar(settings, embedder) as server:
        assert "m011): 10 stored messages are paired in the background" in caplog.text
        assert server.client.get("/stats").json()["keywordPairs"] == {"done": 0, "total": 10}
        assert server.sidecar.db.write(server.sidecar.ops.keyword_pairs.step) is False  # one batch: all done
        assert server.client.get("/stats").json()["keywordPairs"] is None
        assert "all 10 messages read, the backfill is done" in caplog.text
        for word, text in (("北京", MESSAGES["zh"]), ("田中", MESSAGES["ja"]), ("김민수", MESSAGES["ko"])):
            answer = server.client.get("/v1/search", params={"q": word, "mode": "keyword", "k": 3}).json()
            assert first_texts(answer["hits"], "text")[:1] == [text], word
        answer = server.client.get("/v1/search", params={"q": "Albers", "mode": "keyword", "k": 3}).json()
        assert first_texts(answer["hits"], "text") == [MESSAGES["de"]]


def test_beside_the_vector_lane_a_message_sharing_a_few_common_pairs_counts_for_little() -> None:
    """A question in other words shares common pairs (さん, です) with unrelated chatter; the best of those is
    the keyword lane's best hit (1.0, relative). Beside a cosine it counts by the share of the question's pairs
    it holds, so the fact the vector lane found comes first; a keyword search alone ranks by BM25 as before, and
    a question in a spaced language is scored exactly as before."""
    question = "田中さんとの打ち合わせはどこですか"
    terms = query_words_of(question)
    chatter = "田中さんですか、それはいいですね。"  # holds 田中, 中さ, さん, です, すか: the best keyword hit
    fact = MESSAGES["ja"]  # holds 田中, 中さ, さん, んと
    assert 0 < pair_coverage(terms, fact) < 1 and pair_coverage(terms, chatter) < 1
    both = frozenset({"vector", "keyword"})
    scored = {}
    for name, text, cosine, keyword in (("fact", fact, 0.55, 0.6), ("chatter", chatter, 0.3, 1.0)):
        candidate = Candidate(1, cosine=cosine, keyword=keyword, keyword_coverage=pair_coverage(terms, text))
        score(candidate, role="user", importance_score=None, age_hours=1, half_life_hours=168, recency_floor=0.9)
        scored[name] = candidate
        alone = Candidate(1, keyword=keyword, keyword_coverage=pair_coverage(terms, text))
        assert relevance(alone, frozenset({"keyword"})) == keyword  # keyword search: BM25's order
    assert scored["fact"].relevance > scored["chatter"].relevance  # and without the coverage, the other way:
    assert relevance(Candidate(1, cosine=0.3, keyword=1.0), both) > relevance(
        Candidate(1, cosine=0.55, keyword=0.7), both
    )
    english = query_words_of("where is the meeting with Tanaka")
    assert pair_coverage(english, "Tanaka said hi") == 1.0
    assert relevance(Candidate(1, cosine=0.4, keyword=0.6, keyword_coverage=1.0), both) == (0.4 + 0.6) / 2
