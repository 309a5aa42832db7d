"""The PostgreSQL backend answers the store's interface (``store/api.py``) as the SQLite one does: mypy checks
``store/backend.py``'s ``postgres()`` (each module assigned to its protocol's field), and the test checks each
call's parameters at run time (``tests/test_store_api.py``), for every domain the sidecar reaches through."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from openclaw_lossless.store import api
from openclaw_lossless.store.backend import SQLITE, Backend, postgres
from openclaw_lossless.store.postgres.connection import Connection, Database
from tests.test_store_api import assert_answers, operations


def domains() -> list[tuple[str, type[Any]]]:
    """Each ``Backend`` field typed by a protocol of ``store/api.py``, with that protocol."""
    hints = typing.get_type_hints(Backend)
    found = [(name, typing.get_origin(hint) or hint) for name, hint in hints.items()]
    return [(name, protocol) for name, protocol in found if getattr(protocol, "__module__", "") == api.__name__]


def test_every_domain_of_the_interface_is_a_field_of_the_backend() -> None:
    """A protocol added to ``api.py`` without a field would be a call the package could not make on PostgreSQL."""
    protocols = {p for _, p in domains()}
    defined = [value for value in vars(api).values() if isinstance(value, type) and value.__module__ == api.__name__]
    expected = {value for value in defined if getattr(value, "_is_protocol", False)}
    # Rebuild is salvage's (SQLite only); Database, Messages' halves and TermStats are reached otherwise.
    assert expected - protocols <= {api.Database, api.Rebuild, api.MessageWrites, api.MessageReads, api.TermStats}


@pytest.mark.parametrize(("domain", "protocol"), domains(), ids=[name for name, _ in domains()])
def test_each_postgres_module_answers_every_call_of_its_protocol(domain: str, protocol: type[Any]) -> None:
    assert_answers(protocol, getattr(postgres(), domain))
    assert_answers(protocol, getattr(SQLITE, domain))


def test_keyword_statistics_answer_on_both_backends() -> None:
    for backend in (SQLITE, postgres()):
        assert_answers(api.TermStats, backend.term_stats(100))


def test_the_database_class_is_a_unit_of_work_runner() -> None:
    database: type[api.Database[Connection]] = Database  # mypy: the class satisfies the protocol
    assert set(operations(api.Database)) <= set(dir(database))
