"""No module outside ``store/`` runs SQL on the store: the seam between the package and its two backends.

Why it matters to a user: SQL written for SQLite outside the backend would break (or quietly differ) on
PostgreSQL, the very thing the interface exists to prevent. The only statements allowed elsewhere read
OpenClaw's own databases (the host's transcripts and its plugin registry), which are SQLite whatever our store is.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import openclaw_lossless

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

PACKAGE = Path(openclaw_lossless.__file__).parent
HOST_READERS = {"transcripts/readers.py", "transcripts/gaps.py", "doctor/plugin.py"}  # OpenClaw's databases, not ours
STATEMENT_CALLS = {"execute", "executemany", "executescript"}


def statements_outside_the_store(root: Path) -> list[str]:
    """``file:line`` of every ``.execute(...)``-like call in a module outside ``store/`` and the host readers."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith("store/") or relative in HOST_READERS:
            continue
        calls = [node for node in ast.walk(ast.parse(path.read_text(), relative)) if isinstance(node, ast.Call)]
        for call in calls:
            if isinstance(call.func, ast.Attribute) and call.func.attr in STATEMENT_CALLS:
                found.append(f"{relative}:{call.lineno}")
    return found


def test_no_module_outside_the_store_runs_sql_on_it() -> None:
    assert statements_outside_the_store(PACKAGE) == []


def test_the_check_finds_a_statement_outside_the_store(tmp_path: Path) -> None:
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "fine.py").write_text("def f(conn):\n    conn.execute('SELECT 1')\n")
    (tmp_path / "service.py").write_text("def g(conn):\n    return conn.execute('SELECT 1').fetchone()\n")
    assert statements_outside_the_store(tmp_path) == ["service.py:2"]
