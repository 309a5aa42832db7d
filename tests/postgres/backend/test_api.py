"""The PostgreSQL backend answers the store's interface (``store/api.py``) as the SQLite one does: mypy checks
the assignments below (each module to its protocol, as ``tests/test_store_api.py`` does for SQLite), and the
test checks each call's parameters at run time, for every domain the sidecar reaches through."""

from __future__ import annotations

import typing
from typing import Any

import pytest

from openclaw_lossless.store import api
from openclaw_lossless.store.backend import SQLITE, Backend, postgres
from openclaw_lossless.store.postgres import (
    agents,
    archive,
    backlog,
    checks,
    counts,
    file_maintenance,
    forgetting,
    fulltext,
    memory_files,
    message_days,
    messages,
    meta,
    migrations,
    rewrite,
    sessions,
    snapshots,
    subagents,
    transcript_ledger,
    transfer,
    vectors,
)
from openclaw_lossless.store.postgres.connection import Connection, Database
from openclaw_lossless.store.postgres.term_stats import TermStats
from tests.test_store_api import assert_answers, operations

# Checked by mypy: each module (or object) is an implementation of its protocol for PostgreSQL's types.
_migrations: api.Migrations[Database] = migrations
_sessions: api.Sessions[Connection] = sessions
_messages: api.Messages[Connection] = messages
_fulltext: api.Fulltext[Connection] = fulltext
_term_stats: api.TermStats[Connection] = TermStats(100)
_days: api.MessageDays[Connection] = message_days
_vectors: api.Vectors[Connection] = vectors
_backlog: api.Backlog[Connection] = backlog
_meta: api.Meta[Connection] = meta
_snapshots: api.Snapshots[Connection] = snapshots
_subagents: api.Subagents[Connection] = subagents
_ledger: api.TranscriptLedger[Connection] = transcript_ledger
_counts: api.Counts[Connection] = counts
_agents: api.Agents[Connection] = agents
_archive: api.Archive[Connection, Database] = archive
_forgetting: api.Forgetting[Connection, Database] = forgetting
_transfer: api.Transfer[Connection, Database] = transfer
_rewrite: api.Rewrite[Connection] = rewrite
_checks: api.Checks[Connection] = checks
_files: api.FileMaintenance[Database] = file_maintenance
_memory_files: api.MemoryFiles[Connection, Database] = memory_files


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
