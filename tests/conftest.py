"""Shared fixtures: a live sidecar over real HTTP with a real store in a temp dir, and the real model.

The store is SQLite unless the run asks for PostgreSQL (``--store-backend postgresql`` or
``LOSSLESS_TEST_BACKEND=postgresql``): then every test's settings point at a schema of its own on one real
PostgreSQL + pgvector server started for the run (``tests/postgres/server.py``), through the same
``LOSSLESS_DATABASE_URL`` and ``LOSSLESS_DATABASE_SCHEMA`` a user sets, so the same behaviour tests run on
both backends. A test about SQLite's own machinery (its file, WAL, pages, FTS5) is marked ``sqlite_only`` and
runs on the SQLite pass alone.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.embed.model_files import fetch_model
from tests.e2e.prerequisites import unavailable
from tests.helpers import HashEmbedder, LiveSidecar, live_sidecar, make_settings
from tests.postgres.server import PostgresServer, ServerUnavailable

_schemas = itertools.count(1)
BACKEND_DATABASE = "lossless_suite"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store-backend",
        choices=("sqlite", "postgresql"),
        default=os.environ.get("LOSSLESS_TEST_BACKEND", "sqlite"),
        help="the store every sidecar in the run uses (default sqlite)",
    )
    parser.addoption(
        "--container", action="store_true", help="also build and start the Docker image (tests/test_container.py)"
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "sqlite_only: about SQLite's own machinery; skipped on the PostgreSQL pass")
    config.addinivalue_line("markers", "no_store: opens no store (docs, imports, pure modules); run on one pass only")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("--container"):
        built = pytest.mark.skip(reason="builds a container image (minutes): make container-test, or --container")
        for item in items:
            if item.get_closest_marker("container") is not None:
                item.add_marker(built)
    if config.getoption("--store-backend") != "postgresql":
        return
    skip = pytest.mark.skip(reason="about SQLite's own machinery (its file, pages, WAL or FTS5)")
    once = pytest.mark.skip(reason="opens no store: the SQLite pass ran it, the backend cannot change its outcome")
    for item in items:
        if item.get_closest_marker("sqlite_only") is not None:
            item.add_marker(skip)
        elif item.get_closest_marker("no_store") is not None:
            item.add_marker(once)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    try:
        import psycopg  # noqa: F401 - the tests speak to the server through it
    except ImportError:
        unavailable("psycopg is not installed (pip install -e '.[test]'); the PostgreSQL tests need it")
    try:
        server = PostgresServer()
        server.start()
    except ServerUnavailable as exc:
        unavailable(f"no PostgreSQL server for the tests: {exc}")
    print(f"PostgreSQL test server ready in {server.start_seconds:.2f} s")
    yield server
    server.stop()
    server.remove()


@pytest.fixture(scope="session")
def suite_database(request: pytest.FixtureRequest) -> str | None:
    """On the PostgreSQL pass, the URL of the database every test's schema lives in; None on SQLite."""
    if request.config.getoption("--store-backend") != "postgresql":
        return None
    import psycopg

    server: PostgresServer = request.getfixturevalue("postgres_server")
    with psycopg.connect(server.conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{BACKEND_DATABASE}"')
    return server.url(BACKEND_DATABASE)


@pytest.fixture(scope="module", autouse=True)
def module_store_backend(suite_database: str | None) -> Iterator[None]:
    """A module's own schema on the PostgreSQL pass, so a module-scoped store fixture (a loaded conversation, a
    server shared by a module's tests) is on PostgreSQL too; each test then gets its own schema on top, and
    ``helpers.schema_for`` keeps a state dir on the schema it was first seen under."""
    if suite_database is None:
        yield
        return
    schema = f"suite_m{next(_schemas)}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOSSLESS_DATABASE_URL", suite_database)
        patch.setenv("LOSSLESS_DATABASE_SCHEMA", schema)
        yield
    _drop_schemas(suite_database, schema)


def _drop_schemas(url: str, schema: str) -> None:
    """Drop a test's (or module's) schema and the ones ``helpers.schema_for`` gave its other state dirs."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        extra = admin.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (schema + r"\_%",)).fetchall()
        for name in [schema, *(str(row[0]) for row in extra)]:
            admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture(autouse=True)
def store_backend(suite_database: str | None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Point this test's settings at its own PostgreSQL schema on the PostgreSQL pass (dropped afterwards)."""
    if suite_database is None:
        yield "sqlite"
        return
    schema = f"suite_{next(_schemas)}"
    monkeypatch.setenv("LOSSLESS_DATABASE_URL", suite_database)
    monkeypatch.setenv("LOSSLESS_DATABASE_SCHEMA", schema)
    yield "postgresql"
    _drop_schemas(suite_database, schema)


@pytest.fixture
def embedder() -> HashEmbedder:
    return HashEmbedder()


@pytest.fixture
def sidecar(tmp_path: Path, embedder: HashEmbedder) -> Iterator[LiveSidecar]:
    with live_sidecar(make_settings(tmp_path / "state"), embedder) as server:
        yield server


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The local model as the install command leaves it (fetched here if missing; idempotent)."""
    directory = Settings().model_dir
    fetch_model(directory)
    return directory


@pytest.fixture(scope="session")
def local_embedder(model_dir: Path) -> Iterator[LocalEmbedder]:
    """The real all-MiniLM-L6-v2 on onnxruntime: what users run by default."""
    embedder = LocalEmbedder(model_dir, variant=Settings().local_variant, threads=1)
    yield embedder
    embedder.close()
