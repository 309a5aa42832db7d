"""The scale benchmark's bulk fill for PostgreSQL (``benchmarks/scale_postgres_fill.py``) leaves the store the
commit path leaves (``scale_data.fill`` through the backend's ``commit_turn``): the same generator fills two
schemas of one database, once each way, and every table's rows are compared column by column (every column
the schema has, so a column the bulk fill forgot differs), as are the indexes and the baseline files. A turn
committed afterwards gets the next ids in both and is found by keyword search, so the bulk fill left the
identity sequences and the rebuilt keyword index right. Only the wall-clock columns (when a row was written)
are left out of the comparison; they are checked to be the time of the fill."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import psycopg
import pytest
from psycopg import sql

from benchmarks import scale_data, scale_postgres_fill
from openclaw_lossless.capture.records import MessageRecord
from openclaw_lossless.store import backend
from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.postgres import fulltext, migrations
from openclaw_lossless.store.postgres.connection import Database
from openclaw_lossless.store.sqlite.connection import Connection as SqliteConnection
from tests.postgres.server import PostgresServer

MESSAGES = 3000
CHUNK = 1000  # three transactions: ids must run on across them
WALL_CLOCK = {("sessions", "created_at"), ("sessions", "last_seen_at"), ("turns", "committed_at"),
              ("messages", "stored_at"), ("migrations", "applied_at")}  # fmt: skip
ALL_AGENT = Scope(agent_ids=frozenset({scale_data.AGENT}))


@dataclass
class Filled:
    db: Database
    baseline: SqliteConnection
    schema: str
    began: float
    ended: float


@dataclass
class Twins:
    committed: Filled  # through commit_turn
    copied: Filled  # through COPY

    @property
    def both(self) -> tuple[Filled, Filled]:
        return self.committed, self.copied


def real_vectors() -> np.ndarray[Any, np.dtype[np.float32]]:
    """Unit vectors standing in for the model's (some messages get these, the rest stand-ins mixed of them)."""
    rows = np.random.default_rng(3).standard_normal((500, migrations.DEFAULT_DIMENSION)).astype(np.float32)
    out: np.ndarray[Any, np.dtype[np.float32]] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


@pytest.fixture(scope="module")
def twins(postgres_server: PostgresServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Twins]:
    name = "scale_fill"
    with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    url, work, real = postgres_server.url(name), tmp_path_factory.mktemp("scale-fill"), real_vectors()
    sides: list[Filled] = []
    try:
        for schema in ("committed", "copied"):
            began = time.time()
            db = Database(url, schema=schema, write_pool_size=2, read_pool_size=2)
            migrations.migrate(db)
            baseline = scale_data.open_baseline(work / f"{schema}.sqlite", migrations.DEFAULT_DIMENSION)
            sides.append(Filled(db, baseline, schema, began, 0.0))
            if schema == "committed":
                scale_data.fill(db, baseline, MESSAGES, real, ops=backend.postgres(), chunk=CHUNK)
            else:
                dropped = scale_postgres_fill.drop_indexes(db)
                scale_postgres_fill.fill(db, baseline, MESSAGES, real, chunk=CHUNK)
                scale_postgres_fill.build_indexes(db, dropped)
            sides[-1].ended = time.time()
        yield Twins(*sides)
    finally:
        for side in sides:
            side.db.close()
            side.baseline.close()
        with psycopg.connect(postgres_server.conninfo, autocommit=True) as admin:
            admin.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def tables(db: Database) -> dict[str, list[str]]:
    """Every table of the store's schema with every one of its columns, in order."""
    rows = db.reader().execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()"
        " ORDER BY table_name, ordinal_position"
    )
    found: dict[str, list[str]] = {}
    for table, column in rows:
        found.setdefault(str(table), []).append(str(column))
    return found


def rows_of(db: Database, table: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """The table's rows in a stable order, each column as text (a tsvector and a halfvec compare as written)."""
    listed = sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(c)) for c in columns)
    order = sql.SQL(", ").join(sql.Literal(n) for n in range(1, len(columns) + 1))
    query = sql.SQL("SELECT {} FROM {} ORDER BY {}").format(listed, sql.Identifier(table), order)
    return [tuple(row) for row in db.reader().execute(query)]


def count(db: Database, table: str) -> int:
    row = db.reader().execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))).fetchone()
    return 0 if row is None else int(row[0])


def test_every_table_holds_the_same_rows_column_by_column(twins: Twins) -> None:
    layout = tables(twins.committed.db)
    assert layout == tables(twins.copied.db)
    assert "search" in layout["messages"]  # the generated keyword column is compared too
    for table, columns in layout.items():
        compared = [c for c in columns if (table, c) not in WALL_CLOCK]
        assert rows_of(twins.copied.db, table, compared) == rows_of(twins.committed.db, table, compared), table
    counts = {t: count(twins.copied.db, t) for t in ("messages", "message_vectors", "turns", "sessions")}
    assert counts["messages"] == counts["message_vectors"] == MESSAGES
    assert MESSAGES // 4 < counts["turns"] < MESSAGES // 4 + counts["sessions"]  # fours, a shorter last one
    assert rows_of(twins.copied.db, "message_days", ["message_id", "first_day", "last_day"])  # days were read
    assert not rows_of(twins.copied.db, "embedding_backlog", ["message_id", "claimed_by", "claimed_until"])


def test_the_wall_clock_columns_hold_the_time_of_the_fill(twins: Twins) -> None:
    for side in (twins.committed, twins.copied):
        for table, column in sorted(WALL_CLOCK):
            low, high = side.db.reader().execute(
                sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(c=sql.Identifier(column), t=sql.Identifier(table))
            ).fetchone() or (None, None)
            assert low is not None and high is not None, (side.schema, table, column)
            assert side.began - 1 <= float(low) <= float(high) <= side.ended + 1, (side.schema, table, column)


def test_the_indexes_built_again_are_the_migrations_own(twins: Twins) -> None:
    def definitions(side: Filled) -> dict[str, str]:
        rows = side.db.reader().execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()"
        )
        return {str(n): str(d).replace(f"{side.schema}.", "") for n, d in rows}

    committed = definitions(twins.committed)
    assert "messages_search" in committed and "messages_by_session" in committed
    assert definitions(twins.copied) == committed


def test_the_baseline_files_hold_the_same_vectors(twins: Twins) -> None:
    def baseline(side: Filled) -> list[tuple[int, bytes]]:
        rows = side.baseline.execute("SELECT message_id, embedding FROM baseline ORDER BY message_id").fetchall()
        return [(int(i), bytes(v)) for i, v in rows]

    copied = baseline(twins.copied)
    assert len(copied) == MESSAGES
    assert copied == baseline(twins.committed)


def test_keyword_search_answers_alike(twins: Twins) -> None:
    for words in (["kubernetes"], ["invoice", "refund"], ["tomato", "marathon", "guitar"]):
        expression = fulltext.expression_of(words)
        found = [fulltext.best_matches(s.db.reader(), expression, 0, ALL_AGENT, 20) for s in twins.both]
        assert found[0], words
        assert found[1] == found[0], words


def test_a_turn_committed_after_the_fill_gets_the_next_ids_and_is_found(twins: Twins) -> None:
    ops = backend.postgres()
    record = scale_data.bulk_record(
        scale_data.agent_message(scale_data.Message("user", "the quokka spreadsheet is due", int(time.time() * 1000)))
    )
    sessions, turns = count(twins.copied.db, "sessions"), count(twins.copied.db, "turns")
    answers = [side.db.write(lambda conn: _commit(ops, conn, record)) for side in twins.both]
    assert answers[1] == answers[0]
    assert answers[1] == (sessions + 1, turns + 1, [MESSAGES + 1])
    ids = answers[1][2]
    found = fulltext.best_matches(twins.copied.db.reader(), fulltext.expression_of(["quokka"]), 0, ALL_AGENT, 5)
    assert [i for i, _ in found] == ids


def _commit(ops: backend.Backend, conn: Any, record: MessageRecord) -> tuple[int, int, list[int]]:
    session = ops.sessions.ensure_session(conn, "after-fill", f"agent:{scale_data.AGENT}:after-fill")
    status, ids = ops.messages.commit_turn(conn, session, "after-fill-t0", [record], heartbeat=False)
    assert status == "committed"
    turn = conn.execute("SELECT id FROM turns WHERE advancement_key = 'after-fill-t0'").fetchone()
    return session.rowid, int(turn[0]), ids
