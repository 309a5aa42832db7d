"""The store's interface (``store/api.py``) is what the SQLite store does: each SQLite module satisfies its
protocol. mypy checks the assignments below (a module can implement a protocol); the test checks the same at
run time, call by call, so a renamed or reshaped store function shows up as a failing test too."""

from __future__ import annotations

import inspect
from types import ModuleType
from typing import Any

import pytest

from openclaw_lossless.store import api
from openclaw_lossless.store.sqlite import (
    agents,
    archive,
    backlog,
    checks,
    connection,
    counts,
    forgetting,
    fulltext,
    message_days,
    messages,
    meta,
    migrations,
    rebuild,
    rewrite,
    sessions,
    snapshots,
    subagents,
    transcript_ledger,
    transfer,
    vectors,
)
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.sqlite.term_stats import TermStats
from openclaw_lossless.store.statements import SQLITE
from openclaw_lossless.store.statements.timelines import Timelines

# Checked by mypy: each module (or object) is an implementation of its protocol for SQLite's types.
_migrations: api.Migrations[Database] = migrations
_sessions: api.Sessions[Connection] = sessions
_messages: api.Messages[Connection] = messages
_fulltext: api.Fulltext[Connection] = fulltext
_term_stats: api.TermStats[Connection] = TermStats()
_days: api.MessageDays[Connection] = message_days
_vectors: api.Vectors[Connection] = vectors
_backlog: api.Backlog[Connection] = backlog
_meta: api.Meta[Connection] = meta
_snapshots: api.Snapshots[Connection] = snapshots
_timelines: api.Timelines[Connection] = Timelines(SQLITE)
_subagents: api.Subagents[Connection] = subagents
_ledger: api.TranscriptLedger[Connection] = transcript_ledger
_counts: api.Counts[Connection] = counts
_agents: api.Agents[Connection] = agents
_archive: api.Archive[Connection, Database] = archive
_forgetting: api.Forgetting[Connection, Database] = forgetting
_transfer: api.Transfer[Connection, Database] = transfer
_rewrite: api.Rewrite[Connection] = rewrite
_checks: api.Checks[Connection] = checks
_files: api.FileMaintenance[Database] = connection
_rebuild: api.Rebuild[Connection, Database] = rebuild

IMPLEMENTATIONS: list[tuple[type[Any], ModuleType | object]] = [
    (api.Migrations, migrations), (api.Sessions, sessions), (api.Messages, messages), (api.Fulltext, fulltext),
    (api.TermStats, TermStats()), (api.MessageDays, message_days), (api.Vectors, vectors),
    (api.Backlog, backlog), (api.Meta, meta), (api.Snapshots, snapshots), (api.Timelines, Timelines(SQLITE)),
    (api.Subagents, subagents), (api.TranscriptLedger, transcript_ledger), (api.Counts, counts), (api.Agents, agents),
    (api.Archive, archive),
    (api.Forgetting, forgetting), (api.Transfer, transfer), (api.Rewrite, rewrite), (api.Checks, checks),
    (api.FileMaintenance, connection), (api.Rebuild, rebuild),
]  # fmt: skip


def operations(protocol: type[Any]) -> dict[str, inspect.Signature]:
    """The protocol's calls (its own and inherited), each without ``self``."""
    found: dict[str, inspect.Signature] = {}
    for klass in reversed(protocol.__mro__):
        for name, member in vars(klass).items():
            if inspect.isfunction(member) and not name.startswith("_"):
                signature = inspect.signature(member)
                found[name] = signature.replace(parameters=list(signature.parameters.values())[1:])
    return found


def shape(signature: inspect.Signature) -> list[tuple[str, Any, bool]]:
    return [(p.name, p.kind, p.default is not p.empty) for p in signature.parameters.values()]


def assert_answers(protocol: type[Any], implementation: object) -> None:
    """Every call of ``protocol`` exists on ``implementation`` with the same parameters (names, kinds, defaults)."""
    for name, expected in operations(protocol).items():
        function = getattr(implementation, name, None)
        assert callable(function), f"{protocol.__name__}.{name} has no implementation in {implementation!r}"
        assert shape(inspect.signature(function)) == shape(expected), f"{protocol.__name__}.{name} differs"


@pytest.mark.parametrize(("protocol", "implementation"), IMPLEMENTATIONS, ids=lambda x: getattr(x, "__name__", ""))
def test_each_sqlite_module_answers_every_call_of_its_protocol(protocol: type[Any], implementation: object) -> None:
    assert_answers(protocol, implementation)


def test_the_database_class_is_a_unit_of_work_runner() -> None:
    database: type[api.Database[Connection]] = Database  # mypy: the class satisfies the protocol
    assert set(operations(api.Database)) <= set(dir(database))
