"""Keyword search stays bounded as history grows: words found everywhere are not ranked over all of it.

A real store in a temp dir, with ``keyword_term_limit`` set low so a few dozen messages make a word common.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.recall.search import keyword_search
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.api import TermStats
from openclaw_lossless.store.model.sessions import Scope
from tests.helpers import HashEmbedder, make_settings

ALL = Scope(agent_ids=frozenset({"main"}))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Sidecar]:
    settings = make_settings(tmp_path / "state", keyword_term_limit=5)
    sidecar = Sidecar(settings, start_worker=False, provider=HashEmbedder())
    texts = ["the zeppelin hangar lease ends in march, the budget too"]
    texts += [f"budget review number {n} went fine" for n in range(30)]
    for n, text in enumerate(texts):
        sidecar.ingest.commit_turn(f"t{n}", "s1", "agent:main:s1", [{"role": "user", "content": text}],
                            heartbeat=False, recall=settings.recall)  # fmt: skip
    yield sidecar
    sidecar.close()


def _terms(sidecar: Sidecar, limit: int) -> TermStats[Any]:
    """The store's own backend's word counts, as the sidecar makes them."""
    return sidecar.ops.term_stats(limit)


def _search(sidecar: Sidecar, text: str, terms: TermStats[Any] | None) -> list[int]:
    hits = keyword_search(sidecar.db.reader(), sidecar.ops.fulltext, text, ALL, 100, time.monotonic() + 10, terms)
    return [hit.message_id for hit in hits]


def test_a_common_word_is_left_out_when_the_query_has_a_rarer_one(store: Sidecar) -> None:
    assert len(_search(store, "zeppelin budget", None)) == 31  # every budget message matches
    assert _search(store, "zeppelin budget", _terms(store, 5)) == [1]


def test_a_query_of_common_words_ranks_only_their_newest_matches(store: Sidecar) -> None:
    newest = _search(store, "budget", _terms(store, 5))
    assert sorted(newest) == list(range(27, 32))


def test_the_limit_is_a_setting_and_search_uses_it(store: Sidecar) -> None:
    assert [hit.id for hit in store.queries.search("zeppelin budget", "agent:main", 50, "keyword").hits] == [1]


def test_a_word_no_message_holds_does_not_push_out_the_common_ones(store: Sidecar) -> None:
    """Counted 0, such a word was kept as the rarest and the common ones left out: the query matched nothing.
    At a million messages, where most words are common, that emptied the keyword lane for most prompts."""
    assert sorted(_search(store, "budget quixotic", _terms(store, 5))) == list(range(27, 32))
    assert _search(store, "zeppelin quixotic budget", _terms(store, 5)) == [1]
    assert _search(store, "quixotic", _terms(store, 5)) == []


def test_a_rare_word_is_found_however_old(store: Sidecar) -> None:
    """Age never hides a rare word: only common words are cut to their newest matches."""
    assert _search(store, "hangar", _terms(store, 5)) == [1]


@pytest.mark.sqlite_only  # FTS5's statement and SQLite's query planner
def test_keyword_search_is_driven_by_the_full_text_index(store: Sidecar) -> None:
    """The plan starts from FTS5's matches, never from a walk over every message of the agent, and checks
    each match's scope in the narrow scope index, never by loading the message's row (its whole text)."""
    conn = store.db.reader()
    statements: list[str] = []
    conn.set_trace_callback(statements.append)
    try:
        _search(store, "zeppelin budget", _terms(store, 5))
    finally:
        conn.set_trace_callback(None)
    ranked = [sql for sql in statements if "bm25(" in sql]
    assert len(ranked) == 1
    plan = [str(row[3]) for row in conn.execute(f"EXPLAIN QUERY PLAN {ranked[0]}")]
    assert plan[0].startswith("SCAN messages_fts"), plan
    assert not any("messages_by_agent" in step for step in plan), plan
    assert any(step.startswith("SEARCH m USING COVERING INDEX messages_scope") for step in plan), plan
