"""The neighbour lookup on the hot path: the right rows, in scope, at a cost that does not grow with history.

Cost is counted in SQLite virtual-machine steps (a progress handler), not in time, so the test cannot be
flaky on a busy machine and still fails the moment the plan starts walking an agent's history.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from openclaw_lossless.store.model.sessions import Scope
from openclaw_lossless.store.sqlite import messages
from openclaw_lossless.store.sqlite.connection import Database, open_connection
from openclaw_lossless.store.sqlite.migrations import migrate


def _store(path: Path, count: int) -> Any:
    """Two agents' sessions interleaved message by message: 1 and 2 of agent "a", 3 of agent "b"."""
    db = Database(path)
    migrate(db)
    db.close()
    conn = open_connection(path)
    conn.execute("INSERT INTO sessions VALUES (1, 's1', NULL, 'a', 0, 0), (2, 's2', NULL, 'a', 0, 0),"
                 " (3, 's3', NULL, 'b', 0, 0)")  # fmt: skip
    rows = [
        (i, 1 + i % 3, "b" if i % 3 == 2 else "a", "user", 1.6e9 + i, 0, f"text {i}", "{}", str(i).encode(), f"k{i}", 1)
        for i in range(1, count + 1)
    ]
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO messages (id, session_rowid, agent_id, role, created_at, stored_at, text, original,"
        " content_hash, window_key, tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    conn.execute("COMMIT")
    return conn


def _steps(conn: Any, anchors: list[tuple[int, int]], scope: Scope) -> int:
    counted = [0]

    def tick() -> int:
        counted[0] += 1
        return 0

    conn.set_progress_handler(tick, 10)
    try:
        messages.neighbours(conn, anchors, 2, scope)
    finally:
        conn.set_progress_handler(None, 0)
    return counted[0]


def test_neighbours_are_the_nearest_of_the_same_session_and_in_scope(tmp_path: Path) -> None:
    conn = _store(tmp_path / "db.sqlite", 60)
    # message 31 is in session 2 (31 % 3 == 1): its session holds 25, 28, 31, 34, 37, ...
    found = messages.neighbours(conn, [(31, 2), (4, 2)], 2, Scope(frozenset({"a"})))
    around = sorted((n.anchor, n.message.id) for n in found)
    assert around == [(4, 1), (4, 7), (4, 10), (31, 25), (31, 28), (31, 34), (31, 37)]
    assert {n.message.window_key for n in found if n.message.id == 28} == {"k28"}
    # a scope without the agent but with the session still sees it; a scope with neither sees nothing
    assert len(messages.neighbours(conn, [(31, 2)], 2, Scope(frozenset({"b"}), frozenset({2})))) == 4
    assert messages.neighbours(conn, [(31, 2)], 2, Scope(frozenset({"b"}))) == []


def test_neighbour_lookup_cost_does_not_grow_with_history(tmp_path: Path) -> None:
    anchors = [(i, 1 + i % 3) for i in range(300, 2300, 100)]
    mixed = Scope(frozenset({"a"}), frozenset({3}))  # agent and session terms: the plan that once scanned
    small = _store(tmp_path / "small.sqlite", 3_000)
    large = _store(tmp_path / "large.sqlite", 60_000)
    for scope in (Scope(frozenset({"a"})), mixed):
        few, many = _steps(small, anchors, scope), _steps(large, anchors, scope)
        assert many <= few * 1.5 + 50, (scope, few, many)
