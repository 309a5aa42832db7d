"""The vector index: int8 codes and a sign-bit shortlist must find what exact float32 cosine finds.

Real parts throughout: the real local model's vectors for the ranking checks, a real SQLite store in a temp
dir for persistence, reload, the upgrade from the older float32 ``vec0`` table, and keyword recall while
the index is still loading, over real HTTP.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import FORMAT_KEY, VectorIndex
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.provider import EmbeddingProvider, Vectors
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store import quantize
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.sqlite import vectors as stored_vectors
from openclaw_lossless.store.sqlite.connection import open_connection
from openclaw_lossless.store.sqlite.vectors import TABLE
from tests.helpers import HashEmbedder, live_sidecar, make_settings

SUBJECTS = ["the deploy", "my sister's wedding", "the postgres migration", "our trip to Lisbon", "the invoice",
            "the garden", "marathon training", "the new hire", "the security audit", "the sourdough"]  # fmt: skip
VERBS = ["went wrong", "is planned for Friday", "needs a decision", "cost more than expected", "was cancelled",
         "is finally done", "keeps failing", "made everyone happy"]  # fmt: skip
DETAILS = ["after the meeting", "because of the weather", "according to Dana", "before the deadline",
           "and nobody told me", ""]  # fmt: skip
ALL = Scope(agent_ids=frozenset({"main"}))


@pytest.fixture(scope="module")
def model(model_dir: Path) -> Iterator[EmbeddingProvider]:
    """The real local model, this module's own: a live sidecar elsewhere closes the session's when it stops."""
    embedder = LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)
    yield embedder
    embedder.close()


@pytest.fixture(scope="module")
def corpus(model: EmbeddingProvider) -> Vectors:
    """480 short chat lines, embedded by the real model: many near neighbours, as in real history."""
    texts = [f"{s} {v} {d}".strip() for s, v, d in itertools.product(SUBJECTS, VERBS, DETAILS)]
    return np.concatenate([model.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])


@pytest.fixture(scope="module")
def questions(model: EmbeddingProvider) -> Vectors:
    asked = [f"what happened with {s}?" for s in SUBJECTS] + ["anything about Dana?", "what failed before Friday?"]
    return model.embed(asked)


def _index(vectors: Vectors, shortlist: int) -> VectorIndex:
    index = VectorIndex(vectors.shape[1], shortlist=shortlist)
    index.add(list(range(1, len(vectors) + 1)), vectors, ["main"] * len(vectors), [1] * len(vectors))
    index.loaded.set()
    return index


def _exact(vectors: Vectors, query: Vectors, k: int) -> list[int]:
    return [int(i) + 1 for i in np.argsort(-(vectors @ query))[:k]]


def test_int8_codes_keep_the_cosine_of_real_vectors(corpus: Vectors) -> None:
    codes, scales = quantize.quantize(corpus)
    restored = quantize.dequantize(codes, scales)
    cosines = np.sum(restored * corpus, axis=1) / np.linalg.norm(restored, axis=1)
    assert codes.dtype == np.int8 and codes.shape == corpus.shape
    assert cosines.min() > 0.9999


def test_shortlisted_search_finds_the_exact_top_hits(corpus: Vectors, questions: Vectors) -> None:
    """The shortlist (60 of 480) is far smaller than the corpus, so the sign-bit scan decides what is ranked."""
    index = _index(corpus, shortlist=60)
    shares, firsts = [], 0
    for query in questions:
        found = [i for i, _ in index.search(query, ALL, 10)]
        exact = _exact(corpus, query, 10)
        shares.append(len(set(found) & set(exact)) / 10)
        firsts += found[0] == exact[0]
    assert np.mean(shares) >= 0.9, shares
    assert firsts == len(questions)


def _overlap(index: VectorIndex, corpus: Vectors, questions: Vectors, k: int = 10) -> float:
    return float(
        np.mean([len({i for i, _ in index.search(q, ALL, k)} & set(_exact(corpus, q, k))) / k for q in questions])
    )


def test_the_shortlist_grows_with_the_scope(corpus: Vectors, questions: Vectors) -> None:
    """A fixed shortlist keeps fewer true neighbours as the history grows; a share of the scope keeps the search
    as close to exact: 10 vectors, or an eighth of the 480 in scope, rank what a fixed 60 ranks."""
    fixed, grown, small = _index(corpus, shortlist=60), _index(corpus, shortlist=10), _index(corpus, shortlist=10)
    fixed.share, grown.share, small.share = 0.0, 0.125, 0.0
    for query in questions:
        assert grown.search(query, ALL, 10) == fixed.search(query, ALL, 10)
    assert _overlap(small, corpus, questions) < _overlap(grown, corpus, questions)


def test_search_scores_are_cosines(corpus: Vectors, questions: Vectors) -> None:
    index = _index(corpus, shortlist=60)
    hits = index.search(questions[0], ALL, 5)
    for message_id, score in hits:
        assert score == pytest.approx(float(corpus[message_id - 1] @ questions[0]), abs=2e-3)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_scope_forget_and_duplicates(corpus: Vectors) -> None:
    index = VectorIndex(corpus.shape[1], shortlist=8)
    index.add([1, 2, 3], corpus[:3], ["a", "a", "b"], [10, 10, 20])
    index.add([3, 4], corpus[2:4], ["b", "b"], [20, 20])  # 3 again: stored once
    index.loaded.set()
    assert len(index) == 4
    only_b = {i for i, _ in index.search(corpus[0], Scope(agent_ids=frozenset({"b"})), 10)}
    assert only_b == {3, 4}
    parent = {i for i, _ in index.search(corpus[0], Scope(session_rowids=frozenset({10})), 10)}
    assert parent == {1, 2}
    index.forget_through(3)
    assert {i for i, _ in index.search(corpus[0], Scope(agent_ids=frozenset({"a", "b"})), 10)} == {4}
    assert index.vector(2) is None and index.vector(4) is not None


def test_vectors_of_many_ids_are_those_held_in_the_order_asked(corpus: Vectors) -> None:
    index = VectorIndex(corpus.shape[1])
    index.add([2, 5, 7], corpus[:3], ["a", "a", "a"], [1, 1, 1])
    index.loaded.set()

    ids, rows = index.vectors([7, 3, 2, -1, 10**9, 5])  # 3 never held, -1 and 10**9 out of range

    assert ids == [7, 2, 5]
    for ident, row in zip(ids, rows, strict=True):
        held = index.vector(ident)
        assert held is not None and np.array_equal(row, held)
    assert float(rows[0] @ corpus[2]) == pytest.approx(1.0, abs=2e-3)
    assert index.vectors([])[0] == []


def _filled(tmp_path: Path) -> tuple[Sidecar, list[int]]:
    settings = make_settings(tmp_path / "state")
    sidecar = Sidecar(settings, start_worker=False, provider=HashEmbedder())
    for n in range(30):
        sidecar.ingest.commit_turn(
            f"t{n}", "s1", "agent:main:s1",
            [{"role": "user", "content": f"note {n}: the {SUBJECTS[n % 10]} {VERBS[n % 8]}", "timestamp": 1.7e12}],
            heartbeat=False, recall=settings.recall,
        )  # fmt: skip
    assert sidecar.worker is not None
    while sidecar.worker.drain_once():
        pass
    return sidecar, [i for i, _ in _search(sidecar, "the postgres migration keeps failing")]


def _search(sidecar: Sidecar, text: str) -> list[tuple[int, float]]:
    assert sidecar.index is not None
    return sidecar.index.search(HashEmbedder().embed([text])[0], ALL, 5)


def test_restart_reloads_the_index_from_sqlite(tmp_path: Path) -> None:
    sidecar, before = _filled(tmp_path)
    settings = sidecar.settings
    sidecar.close()
    embedder = HashEmbedder()
    reopened = Sidecar(settings, start_worker=False, provider=embedder)
    try:
        assert reopened.index is not None and len(reopened.index) == 30
        assert [i for i, _ in _search(reopened, "the postgres migration keeps failing")] == before
        assert embedder.batches == 0  # nothing re-embedded
    finally:
        reopened.close()


@pytest.mark.sqlite_only  # sqlite-vec's float32 vec0 table of an older release, converted in the file
def test_an_older_float32_vec0_table_is_converted_without_re_embedding(tmp_path: Path) -> None:
    sidecar, before = _filled(tmp_path)
    settings, path = sidecar.settings, sidecar.settings.database_path
    sidecar.close()
    _rewrite_as_vec0(path)
    embedder = HashEmbedder()
    upgraded = Sidecar(settings, start_worker=False, provider=embedder)
    try:
        conn = upgraded.db.reader()
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (TABLE,)).fetchone()[0]
        assert "embedding int8[64]" in sql  # the int8 vec0 table of migration m009
        assert conn.execute("SELECT count(*) FROM embedding_backlog").fetchone()[0] == 0
        assert [i for i, _ in _search(upgraded, "the postgres migration keeps failing")] == before
        assert embedder.batches == 0 and not upgraded.rebuild.rebuilding
    finally:
        upgraded.close()


def _rewrite_as_vec0(path: Path) -> None:
    """Put the store back in the shape the version before last wrote: float32 vectors in a vec0 table."""
    conn = open_connection(path)
    try:
        rows = conn.execute(f"SELECT message_id, scale, embedding FROM {TABLE}").fetchall()
        conn.execute(f"DROP TABLE {TABLE}")
        conn.execute(
            f"CREATE VIRTUAL TABLE {TABLE} USING vec0("
            "message_id INTEGER PRIMARY KEY, embedding float[64] distance_metric=cosine)"
        )
        for message_id, scale, codes in rows:
            floats = np.frombuffer(codes, dtype=np.int8).astype(np.float32) * np.float32(scale)
            conn.execute(f"INSERT INTO {TABLE} (message_id, embedding) VALUES (?, ?)", (message_id, floats.tobytes()))
        conn.execute("DELETE FROM meta WHERE key = ?", (FORMAT_KEY,))
        conn.execute("DELETE FROM migrations WHERE name = 'm009_vectors_in_vec0'")
    finally:
        conn.close()


@pytest.mark.sqlite_only  # the in-memory index's load; on PostgreSQL the vectors are searched in the database at once
def test_recall_answers_by_keyword_while_the_index_loads(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder()) as server:
        body = {"sessionId": "s1", "sessionKey": "agent:main:s1", "advancementKey": "t1",
                "messages": [{"role": "user", "content": "the zeppelin hangar lease ends in March"}]}  # fmt: skip
        assert server.post("commit-turn", body).status_code == 200
        server.wait_for_backlog()
        index = server.sidecar.index
        assert index is not None and len(index) == 1
        index.loaded.clear()  # the state a large store is in for its first seconds
        health = server.client.get("/healthz").json()
        assert health["status"] == "ok" and health["vectorIndex"]["loaded"] is False
        ask = {"sessionId": "s2", "sessionKey": "agent:main:s2", "messages": [], "prompt": "zeppelin hangar?",
               "trace": True}  # fmt: skip
        result = server.post("assemble", ask).json()
        assert "zeppelin hangar lease" in result["systemPromptAddition"]
        lanes = {lane for c in result["trace"]["candidates"] for lane in c["lanes"]}
        assert lanes == {"keyword"}
        assert server.client.get("/stats").json()["vectorIndex"]["searchesWhileLoading"] == 1
        index.loaded.set()
        result = server.post("assemble", ask | {"prompt": "zeppelin hangar lease?"}).json()
        assert "vector" in {lane for c in result["trace"]["candidates"] for lane in c["lanes"]}


def test_the_server_loads_the_index_in_the_background_then_embeds(tmp_path: Path) -> None:
    sidecar, _ = _filled(tmp_path)
    settings = sidecar.settings
    sidecar.close()
    background = Sidecar(settings, provider=HashEmbedder(), background_load=True)
    try:
        assert background.index is not None and background.index.loaded.wait(30)
        assert len(background.index) == 30
        background.ingest.commit_turn("late", "s1", "agent:main:s1", [{"role": "user", "content": "a late note"}],
                               heartbeat=False, recall=settings.recall)  # fmt: skip
        deadline = time.monotonic() + 30
        while len(background.index) < 31 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(background.index) == 31  # the worker runs once the load is done
    finally:
        background.close()


@pytest.mark.sqlite_only  # the in-memory index's load; on PostgreSQL there is nothing to read at start
def test_a_server_stopped_while_its_index_loads_waits_for_the_load_before_closing_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server stopped in its first seconds: the load read on a connection that close() then closed under
    it (the process crashed), and a load that finished after close() started the worker on a closed store."""
    sidecar, _ = _filled(tmp_path)
    settings = sidecar.settings
    sidecar.close()
    reading = threading.Event()
    read_all = stored_vectors.read_all

    def slow_read_all(conn: Any, dimension: int) -> Iterator[object]:
        for block in read_all(conn, dimension):
            yield block
            reading.set()
            time.sleep(0.5)  # the next block of a large store is still being read

    monkeypatch.setattr(stored_vectors, "read_all", slow_read_all)
    before = set(threading.enumerate())
    background = Sidecar(settings, provider=HashEmbedder(), background_load=True)
    assert reading.wait(30)
    background.close()
    assert not [t.name for t in set(threading.enumerate()) - before if t.name.startswith("lossless-")]  # nor the worker


def test_a_shortlist_of_many_blocks_ranks_exactly(corpus: Vectors, questions: Vectors) -> None:
    """A shortlist is rescored a block at a time (a million-message store shortlists 40,000): with every one
    of 5,280 vectors shortlisted, each hit's score is its cosine, across block edges, and the hits are the
    exact top 50 up to int8 rounding (a hit is never further than that below the exact 50th)."""
    rng = np.random.default_rng(7)
    many = np.tile(corpus, (11, 1)) + rng.normal(0, 0.05, size=(11 * len(corpus), corpus.shape[1]))
    many = (many / np.linalg.norm(many, axis=1, keepdims=True)).astype(np.float32)
    index = _index(many, shortlist=len(many))
    for query in questions:
        hits = index.search(query, ALL, 50)
        exact = many @ query
        fiftieth = float(np.sort(exact)[-50])
        assert len(hits) == 50 and len({i for i, _ in hits} & set(_exact(many, query, 50))) >= 45
        for message_id, score in hits:
            assert score == pytest.approx(float(exact[message_id - 1]), abs=2e-3)
            assert exact[message_id - 1] >= fiftieth - 4e-3


def test_a_keyword_hit_whose_vector_is_not_made_yet_is_still_found(tmp_path: Path) -> None:
    """Under load the keyword lane finds messages the worker has not embedded yet: their vector rows are none,
    and the search must answer with the keyword hit (PostgreSQL's index answered a (0, 0) array: a 500)."""
    settings = make_settings(tmp_path / "state")
    sidecar = Sidecar(settings, provider=HashEmbedder(), start_worker=False)  # nothing gets embedded
    try:
        message = {"role": "user", "content": "the zeppelin hangar lease ends in March"}
        sidecar.ingest.commit_turn("t1", "s1", "agent:main:s1", [message], heartbeat=False, recall=settings.recall)
        hits = sidecar.queries.search("zeppelin hangar", "all", 5, "hybrid").hits
        assert [hit.text for hit in hits] == [message["content"]]
        assert "keyword" in hits[0].lanes
    finally:
        sidecar.close()
