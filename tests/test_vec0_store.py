"""The vectors live in a sqlite-vec ``vec0`` table: any SQLite with the stock extension can search them.

Real parts: the real local model, real stores in a temp dir, the sidecar over real HTTP, and a connection
that loads only the stock ``sqlite-vec`` package (not this project's connection code). The release store
(``tests/fixtures/store-0.1.0-int8-vectors.sqlite``) was written by the release before migration m009, with
the real local model; see ``tests/fixtures/README.md``. All of it is sqlite-vec's table, so it runs on the
SQLite pass; PostgreSQL's pgvector rows have their own tests (tests/postgres/backend/test_vectors.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlite_vec

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import VectorIndex
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.provider import EmbeddingProvider, ProviderIdentity, Vectors
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store import quantize
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.model.vectors import StoredVectors
from openclaw_lossless.store.sqlite import vectors as stored
from openclaw_lossless.store.sqlite.connection import Database
from openclaw_lossless.store.sqlite.migrations import migrate
from tests.helpers import live_sidecar, make_settings

pytestmark = pytest.mark.sqlite_only

RELEASE_STORE = Path(__file__).parent / "fixtures" / "store-0.1.0-int8-vectors.sqlite"
NOTES = [
    "The staging database moved to db-stage-2 and the old host is retired.",
    "My sister's wedding is on the 14th of June in Porto.",
    "The sourdough starter needs feeding twice a day while it is warm.",
    "Marathon training: 32 km long run on Sunday, then a rest week.",
    "The invoice from the printer was paid twice by mistake; ask for a refund.",
]
QUESTIONS = ["what is the name of the new staging database host?", "when and where is the wedding?",
             "how often do I feed the starter?", "what happened with the printer's bill?"]  # fmt: skip
RELEASE_QUESTIONS = ["what went wrong with the deploy?", "the postgres migration", "Lisbon trip costs"]


@pytest.fixture(scope="module")
def model(model_dir: Path) -> Iterator[EmbeddingProvider]:
    """The real local model for queries, this module's own (a live sidecar closes the one it was given)."""
    embedder = LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)
    yield embedder
    embedder.close()


def stock_connection(path: Path) -> Any:
    """A connection as any other tool would open one: the SQLite binding and the stock sqlite-vec, nothing else."""
    try:
        import sqlean as module
    except ImportError:  # a Python whose sqlite3 can load extensions
        import sqlite3 as module
    conn = module.connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    return conn


def test_a_stock_sqlite_vec_connection_finds_a_message_by_knn(
    tmp_path: Path, model_dir: Path, model: EmbeddingProvider
) -> None:
    settings = make_settings(tmp_path / "state")
    sidecar_model = LocalEmbedder(model_dir, variant=settings.local_variant, threads=1)
    with live_sidecar(settings, sidecar_model) as server:
        messages = [{"role": "user", "content": text, "timestamp": 1.7e12 + n} for n, text in enumerate(NOTES)]
        assert server.post("commit-turn", {"sessionId": "s1", "advancementKey": "t1", "messages": messages}).is_success
        server.wait_for_backlog()
    conn = stock_connection(settings.database_path)
    try:
        ids = {str(r[1]): int(r[0]) for r in conn.execute("SELECT id, text FROM messages")}
        for question, note in zip(QUESTIONS, [NOTES[0], NOTES[1], NOTES[2], NOTES[4]], strict=True):
            query = json.dumps([float(x) for x in model.embed([question])[0]])
            found = conn.execute(
                "SELECT message_id, distance FROM message_vectors"
                " WHERE embedding MATCH vec_quantize_int8(vec_f32(?), 'unit') AND k = 10 ORDER BY distance",
                (query,),
            ).fetchall()
            assert len(found) == len(NOTES)
            assert found[0][0] == ids[note], (question, found)
        # the nearest to a stored message, found from the message itself: itself first, at distance ~0
        nearest = conn.execute(
            "SELECT message_id, distance FROM message_vectors WHERE embedding MATCH"
            " (SELECT embedding FROM message_vectors WHERE message_id = ?) AND k = 2",
            (ids[NOTES[3]],),
        ).fetchall()
        assert nearest[0][0] == ids[NOTES[3]] and nearest[0][1] < 1e-6
    finally:
        conn.close()


class CountingProvider:
    """The real model, counting what it is asked to embed (an upgrade must embed nothing)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def identity(self) -> ProviderIdentity:
        return self.inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.embed(texts)

    def close(self) -> None:
        self.inner.close()


def _release_rows(path: Path) -> dict[int, tuple[int, float, bytes]]:
    conn = stock_connection(path)
    try:
        rows = conn.execute("SELECT message_id, session_rowid, scale, codes FROM message_vectors").fetchall()
        return {int(r[0]): (int(r[1]), float(r[2]), bytes(r[3])) for r in rows}
    finally:
        conn.close()


def _index_of(rows: dict[int, tuple[int, float, bytes]], agents: dict[int, str]) -> VectorIndex:
    """The index as the release loaded it: the same codes, scales, sessions and agents."""
    index = VectorIndex(384)
    ids = sorted(rows)
    codes = np.frombuffer(b"".join(rows[i][2] for i in ids), dtype=np.int8).reshape(len(ids), 384)
    index._append(  # the release's load fed these arrays to the same method
        np.array(ids, dtype=np.int64),
        codes,
        np.array([rows[i][1] for i in ids], dtype=np.float32),
        [agents[rows[i][0]] for i in ids],
        [rows[i][0] for i in ids],
    )
    index.loaded.set()
    return index


def test_a_release_store_is_migrated_in_place_without_re_embedding(
    tmp_path: Path, model_dir: Path, model: EmbeddingProvider
) -> None:
    settings = make_settings(tmp_path / "state")
    settings.state_dir.mkdir(mode=0o700)
    shutil.copy(RELEASE_STORE, settings.database_path)
    settings.database_path.chmod(0o600)
    before = _release_rows(settings.database_path)
    assert len(before) == 40
    provider = CountingProvider(LocalEmbedder(model_dir, variant=settings.local_variant, threads=1))
    upgraded = Sidecar(settings, start_worker=False, provider=provider)
    try:
        conn = upgraded.db.reader()
        assert (
            "USING vec0" in conn.execute("SELECT sql FROM sqlite_master WHERE name = 'message_vectors'").fetchone()[0]
        )
        after = conn.execute("SELECT message_id, session_rowid, scale, embedding FROM message_vectors").fetchall()
        assert {int(r[0]): (int(r[1]), float(r[2]), bytes(r[3])) for r in after} == before  # same codes, bit for bit
        assert conn.execute("SELECT count(*) FROM embedding_backlog").fetchone()[0] == 0
        assert provider.texts == 0  # nothing embedded again: no model change was seen
        agents = {int(r[0]): str(r[1]) for r in conn.execute("SELECT id, agent_id FROM sessions")}
        release = _index_of(before, agents)
        assert upgraded.index is not None and len(upgraded.index) == 40
        for question in RELEASE_QUESTIONS:
            query = model.embed([question])[0]
            for scope in (Scope(agent_ids=frozenset({"main"})), Scope(agent_ids=frozenset({"main", "helper"}))):
                assert upgraded.index.search(query, scope, 10) == release.search(query, scope, 10)
    finally:
        upgraded.close()


def _messages(conn: Any, count: int) -> None:
    """``count`` bare messages in one session of agent ``a`` (the vector functions need only their ids)."""
    conn.execute("INSERT INTO sessions (id, session_id, agent_id, created_at, last_seen_at) VALUES (1, 's', 'a', 0, 0)")
    conn.executemany(
        "INSERT INTO messages (id, session_rowid, agent_id, role, created_at, stored_at, text, original,"
        " content_hash, window_key, tokens) VALUES (?, 1, 'a', 'user', 0, 0, ?, ?, ?, ?, 1)",
        [(i, f"m{i}", f"m{i}", f"h{i}".encode(), f"w{i}") for i in range(1, count + 1)],
    )


def test_the_index_reads_the_chunk_tables_as_sqlite_vec_reads_its_rows(tmp_path: Path) -> None:
    """The start-up load reads sqlite-vec's chunk tables directly (fast); it must see exactly the rows the
    ``vec0`` table answers through SQLite, also after deletions leave holes in the chunks."""
    db = Database(tmp_path / "db.sqlite")
    try:
        migrate(db)
        rng = np.random.default_rng(7)
        floats = rng.standard_normal((2100, 384)).astype(np.float32)  # three chunks of 1,024 rows
        codes, scales = quantize.quantize(floats)

        def fill(conn: Any) -> None:
            _messages(conn, 2100)
            stored.write(conn, list(range(1, 2101)), codes, scales, [1 + i % 5 for i in range(2100)])
            stored.delete(conn, [3, 500, 1024, 1025, *range(1100, 1300)])

        db.write(fill)
        conn = db.reader()
        assert stored._chunks_readable(conn, 384)
        fast = list(stored.read_all(conn, 384))
        slow = list(stored._select_blocks(conn, 384))
        key, got = _rows_of(slow), _rows_of(fast)
        assert got == key and len(got) == 2100 - 204
        assert got[2100] == (1 + 2099 % 5, codes[2099].tobytes(), float(scales[2099]))
    finally:
        db.close()


def test_missing_vectors_are_found_by_message_and_archiving_deletes_only_its_range(tmp_path: Path) -> None:
    """What ``reindex --vectors --missing`` queues and ``doctor`` counts, and what archiving removes."""
    db = Database(tmp_path / "db.sqlite")
    try:
        migrate(db)
        codes, scales = quantize.quantize(np.random.default_rng(3).standard_normal((30, 384)).astype(np.float32))

        def fill(conn: Any) -> None:
            _messages(conn, 40)
            stored.write(conn, list(range(1, 31)), codes, scales, [1] * 30)  # 31..40 have none
            stored.write(conn, [5], codes[:1], scales[:1], [1])  # embedded again: replaced, not doubled
            stored.write(conn, [99], codes[:1], scales[:1], [1])  # no such message (forgotten meanwhile): skipped

        db.write(fill)
        assert db.write(stored.unaccounted) == (10, 0)
        assert db.write(stored.queue_missing) == 10
        assert db.write(stored.unaccounted) == (0, 0) and stored.count(db.reader()) == 30
        replaced = db.reader().execute("SELECT embedding FROM message_vectors WHERE message_id = 5").fetchone()[0]
        assert replaced == codes[0].tobytes()
        assert db.write(lambda conn: stored.delete_through(conn, 12, limit=5)) == 5
        assert db.write(lambda conn: stored.delete_through(conn, 12)) == 7
        left = {int(r[0]) for r in db.reader().execute("SELECT message_id FROM message_vectors")}
        assert left == set(range(13, 31))
        kept = db.reader().execute("SELECT embedding FROM message_vectors WHERE message_id = 13").fetchone()[0]
        assert kept == codes[12].tobytes()
    finally:
        db.close()


def _rows_of(blocks: list[StoredVectors]) -> dict[int, tuple[int, bytes, float]]:
    return {
        int(b.ids[k]): (int(b.sessions[k]), b.codes[k].tobytes(), float(b.scales[k]))
        for b in blocks
        for k in range(len(b.ids))
    }
