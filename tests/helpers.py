"""Test support: a deterministic fake embedder, a live sidecar on loopback, and the one error-shape check."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

import httpx
import numpy as np
import pytest
import uvicorn

from benchmarks.harness import free_port as free_port  # one for the tests and the benchmarks
from openclaw_lossless.app import create_app, server_config
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.provider import EmbeddingProvider, ProviderIdentity, Vectors
from openclaw_lossless.sidecar import Sidecar
from openclaw_lossless.store.sqlite.connection import open_connection

_WORD = re.compile(r"\w+")


class HashEmbedder:
    """Bag of hashed words: different texts get different vectors, shared words make them similar.

    Counts batches and texts so tests can see what was embedded; never a constant vector.
    """

    def __init__(self, dimension: int = 64, model: str = "hash-words") -> None:
        self._identity = ProviderIdentity("test-hash", model, "words", dimension)
        self.batches = 0
        self.texts: list[str] = []

    @property
    def identity(self) -> ProviderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        self.batches += 1
        self.texts += texts
        out = np.zeros((len(texts), self._identity.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in _WORD.findall(text.lower()):
                digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
                out[row, int.from_bytes(digest[:4], "little") % self._identity.dimension] += 1.0
            out[row, -1] += 0.01
        normalised: Vectors = out / np.linalg.norm(out, axis=1, keepdims=True)
        return normalised

    def close(self) -> None:
        return None


_schemas: dict[str, str] = {}  # state dir -> its schema, for the whole run
_claimed: set[str] = set()
_more_schemas = itertools.count(2)


def schema_for(state_dir: Path) -> str | None:
    """On the PostgreSQL pass, the schema holding the store of ``state_dir``; None on SQLite.

    The first state dir seen under a schema (``LOSSLESS_DATABASE_SCHEMA``, set by conftest.py) gets it;
    another state dir (a copy to import into, a second host) gets a schema of its own, as it would get a
    file of its own on SQLite, so two stores never share their rows. A state dir keeps its schema for the
    run, so a module's store is found again by each of its tests.
    """
    base = os.environ.get("LOSSLESS_DATABASE_SCHEMA")
    if not os.environ.get("LOSSLESS_DATABASE_URL") or base is None:
        return None
    key = str(state_dir.resolve())
    if key not in _schemas:
        _schemas[key] = f"{base}_{next(_more_schemas)}" if base in _claimed else base
        _claimed.add(_schemas[key])
    return _schemas[key]


def per_test_on_postgres(fixture_name: str, config: pytest.Config) -> Literal["function", "module"]:
    """A fixture's scope: ``module``, but ``function`` on the PostgreSQL pass, where a store lives in its
    test's schema (set and dropped by conftest.py around each test), so a module's store is built per test."""
    return "function" if config.getoption("--store-backend") == "postgresql" else "module"


def make_settings(state_dir: Path, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "state_dir": state_dir,
        "openclaw_state": state_dir.parent / "openclaw-state",
        "port": free_port(),
        "synchronous": "NORMAL",
    }
    schema = schema_for(state_dir)
    if schema is not None:
        values["database_schema"] = schema
    return Settings(**(values | overrides))


def on_postgres(settings: Settings) -> bool:
    return settings.database_url is not None


def store_rows(settings: Settings, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """The rows of one plain SQL statement (``?`` placeholders) on the store ``settings`` name, either backend.

    For a test that reads a table to check what a behaviour stored; the statement must be SQL both speak."""
    if settings.database_url is None:
        conn = open_connection(settings.database_path)
        try:
            rows = conn.execute(sql, tuple(params)).fetchall()
            conn.commit()
            return [tuple(row) for row in rows]
        finally:
            conn.close()
    import psycopg

    with psycopg.connect(settings.database_url.get_secret_value(), autocommit=True) as pg:
        pg.execute(f'SET search_path TO "{settings.database_schema}", public')
        statement = sql.replace("%", "%%").replace("?", "%s") if params else sql
        cursor = pg.execute(statement, tuple(params) if params else None)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description is not None else []


class LiveSidecar:
    """The real app served by uvicorn in a thread on 127.0.0.1, reached over real HTTP."""

    def __init__(self, settings: Settings, provider: EmbeddingProvider | None) -> None:
        self.settings = settings
        self.sidecar = Sidecar(settings, provider=provider)
        config = server_config(create_app(settings, sidecar=self.sidecar), settings, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = f"http://127.0.0.1:{settings.port}"
        self.token = settings.token_path.read_text().strip()
        self.client = httpx.Client(base_url=self.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30)

    def start(self) -> LiveSidecar:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("sidecar did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(10)
        self.sidecar.close()

    def post(self, hook: str, body: dict[str, Any]) -> httpx.Response:
        return self.client.post(f"/v1/hooks/{hook}", json=body)

    def wait_for_backlog(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self.client.get("/stats").json()["backlog"] > 0:
            if time.monotonic() > deadline:
                raise AssertionError("embedding backlog did not drain")
            time.sleep(0.05)


@contextmanager
def live_sidecar(settings: Settings, provider: EmbeddingProvider | None) -> Iterator[LiveSidecar]:
    server = LiveSidecar(settings, provider).start()
    try:
        yield server
    finally:
        server.stop()


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """Every error has one shape: {"error": {"code": <stable code>, "message": <what to fix>}}."""
    assert response.status_code == status, response.text
    body: dict[str, Any] = response.json()
    assert set(body) == {"error"}
    assert body["error"]["code"] == code
    assert isinstance(body["error"]["message"], str) and body["error"]["message"]
    return body


def db_fingerprint(place: Settings | Path) -> dict[str, Any]:
    """Row counts of every table and a checksum of every message: what 'the database is unchanged' means.

    ``place``: the settings of the store (either backend), or a SQLite file. Not counted: what the background
    worker changes by itself (vectors, the backlog it drains)."""
    if isinstance(place, Settings):
        if place.database_url is not None:
            return _pg_fingerprint(place)
        place = place.database_path
    conn = open_connection(place)
    try:
        listing = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'"
            " AND name NOT LIKE '%_fts%' AND name NOT LIKE 'message_vectors%'"
            # The worker drains the backlog on its own; anything a write queues is a message, counted above.
            " AND name NOT IN ('embedding_backlog', 'embedding_cache')"
            # vec0 numbers its chunks with AUTOINCREMENT: the worker's first vectors add rows here.
            " AND name != 'sqlite_sequence'"
        )
        tables = [r[0] for r in listing]
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
        digest = hashlib.sha256()
        for row in conn.execute(
            "SELECT id, session_rowid, role, text, original, content_hash FROM messages ORDER BY id"
        ):
            digest.update(repr(tuple(row)).encode())
        turns = hashlib.sha256(repr(conn.execute("SELECT advancement_key FROM turns ORDER BY id").fetchall()).encode())
        return {"counts": counts, "messages": digest.hexdigest(), "turns": turns.hexdigest()}
    finally:
        conn.close()


def stored_bytes(settings: Settings) -> bytes:
    """Everything the store holds, to look for a string in: the SQLite file and its WAL as a hex editor sees
    them, or on PostgreSQL every row of every table of the store's schema as text (each table's sorted)."""
    if settings.database_url is None:
        path = settings.database_path
        files = (Path(f"{path}{suffix}") for suffix in ("", "-wal"))
        return b"".join(file.read_bytes() for file in files if file.exists())
    listing = "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'"
    tables = [name for (name,) in store_rows(settings, listing, (settings.database_schema,))]
    parts = []
    for table in sorted(tables):
        texts = sorted(text for (text,) in store_rows(settings, f'SELECT t::text FROM "{table}" t'))
        parts.append("\n".join([table, *texts]))
    return "\n".join(parts).encode()


def keyword_rows(settings: Settings, phrase: str) -> list[int]:
    """The messages the store's keyword index finds for ``phrase`` (FTS5's phrase query, or PostgreSQL's)."""
    if settings.database_url is None:
        sql = "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rowid"
        return [int(r[0]) for r in store_rows(settings, sql, ('"' + phrase.replace('"', " ") + '"',))]
    sql = "SELECT id FROM messages WHERE search @@ phraseto_tsquery('lossless', ?) ORDER BY id"
    return [int(r[0]) for r in store_rows(settings, sql, (phrase,))]


def _pg_fingerprint(settings: Settings) -> dict[str, Any]:
    """``db_fingerprint`` of a PostgreSQL store: the same tables counted, the same columns digested."""
    tables = [
        name
        for (name,) in store_rows(
            settings,
            "SELECT table_name FROM information_schema.tables WHERE table_schema = ? AND table_type = 'BASE TABLE'"
            " AND table_name NOT LIKE 'message_vectors%'"
            " AND table_name NOT IN ('embedding_backlog', 'embedding_cache')",
            (settings.database_schema,),
        )
    ]
    counts = {t: store_rows(settings, f'SELECT count(*) FROM "{t}"')[0][0] for t in sorted(tables)}
    digest = hashlib.sha256()
    for row in store_rows(
        settings, "SELECT id, session_rowid, role, text, original, content_hash FROM messages ORDER BY id"
    ):
        digest.update(repr(row).encode())
    turns = hashlib.sha256(repr(store_rows(settings, "SELECT advancement_key FROM turns ORDER BY id")).encode())
    return {"counts": counts, "messages": digest.hexdigest(), "turns": turns.hexdigest()}


NOBODY_PORT = 9  # the discard port: no sidecar answers there, so the CLI opens the database file


@contextmanager
def schema_of(state: Path) -> Iterator[None]:
    """On the PostgreSQL pass, ``LOSSLESS_DATABASE_SCHEMA`` names this state dir's store while the block runs
    (a CLI run in-process reads it as a user's shell would hand it over); nothing on SQLite."""
    schema, before = schema_for(state), os.environ.get("LOSSLESS_DATABASE_SCHEMA")
    if schema is not None:
        os.environ["LOSSLESS_DATABASE_SCHEMA"] = schema
    try:
        yield
    finally:
        if schema is not None and before is not None:
            os.environ["LOSSLESS_DATABASE_SCHEMA"] = before


def run_cli(capsys: pytest.CaptureFixture[str], state: Path, *args: str) -> tuple[int, str, str]:
    """The CLI on the store in ``state`` (the file itself, no sidecar): its exit code, stdout and stderr."""
    from openclaw_lossless.cli.main import main

    with schema_of(state):
        code = main([*args, "--state-dir", str(state), "--port", str(NOBODY_PORT)])
    out, err = capsys.readouterr()
    return code, out, err


def run_cli_json(capsys: pytest.CaptureFixture[str], state: Path, *args: str) -> Any:
    """``run_cli`` with ``--json``, which must succeed: its parsed output."""
    code, out, err = run_cli(capsys, state, *args, "--json")
    assert code == 0, err
    return json.loads(out)
