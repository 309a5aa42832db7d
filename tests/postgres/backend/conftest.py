"""Each backend test gets a schema of its own in one database created once per session.

Why a schema and not a database per test: ``CREATE DATABASE`` costs 0.4-0.8 s on a loaded machine, a schema
a few milliseconds, and a store's tables all live in its schema (``Database(url, schema=...)``), so tests
cannot see each other's rows. The extensions live in ``public``, once for the database.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from openclaw_lossless.store.postgres import migrations
from openclaw_lossless.store.postgres.connection import Database
from tests.postgres.server import PostgresServer

DATABASE = "lossless_backend"
_schema_numbers = itertools.count(1)


@dataclass(frozen=True)
class Place:
    """Where one test's store lives: the database's URL and the test's own schema."""

    url: str
    schema: str


@pytest.fixture(scope="session")
def backend_database(postgres_server: PostgresServer) -> str:
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
    return postgres_server.url(DATABASE)


@pytest.fixture
def place(backend_database: str) -> Iterator[Place]:
    """An empty schema name for this test (nothing created yet); dropped with everything in it afterwards."""
    schema = f"t{next(_schema_numbers)}_{os.getpid()}"
    yield Place(backend_database, schema)
    with psycopg.connect(backend_database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@pytest.fixture
def store(place: Place) -> Iterator[Database]:
    """A migrated store in this test's schema."""
    db = Database(place.url, schema=place.schema, write_pool_size=4, read_pool_size=4)
    try:
        migrations.migrate(db)
        yield db
    finally:
        db.close()
