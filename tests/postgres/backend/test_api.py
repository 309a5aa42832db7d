"""The PostgreSQL modules answer the store's interface (``store/api.py``) as the SQLite ones do: mypy checks the
assignments below, and the test checks each call's parameters at run time (``tests/test_store_api.py``)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

from openclaw_lossless.store import api
from openclaw_lossless.store.postgres import backlog, connection, message_days, messages, meta, migrations, sessions
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.test_store_api import assert_answers, operations

_migrations: api.Migrations[Database] = migrations
_sessions: api.Sessions[Connection] = sessions
_messages: api.Messages[Connection] = messages
_days: api.MessageDays[Connection] = message_days
_backlog: api.Backlog[Connection] = backlog
_meta: api.Meta[Connection] = meta
_files: api.FileMaintenance[Database] = connection

IMPLEMENTATIONS: list[tuple[type[Any], ModuleType]] = [
    (api.Migrations, migrations), (api.Sessions, sessions), (api.Messages, messages),
    (api.MessageDays, message_days), (api.Backlog, backlog), (api.Meta, meta), (api.FileMaintenance, connection),
]  # fmt: skip


@pytest.mark.parametrize(("protocol", "implementation"), IMPLEMENTATIONS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_postgres_module_answers_every_call_of_its_protocol(protocol: type[Any], implementation: object) -> None:
    assert_answers(protocol, implementation)


def test_the_database_class_is_a_unit_of_work_runner() -> None:
    database: type[api.Database[Connection]] = Database  # mypy: the class satisfies the protocol
    assert set(operations(api.Database)) <= set(dir(database))
