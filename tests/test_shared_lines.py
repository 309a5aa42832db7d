"""scripts/shared_lines.py: the two store backends spell no more statements twice than the committed ceiling.

Statements both backends run alike live once in ``store/statements/``; a copy pasted back into a backend
shows up here. Lower the ceiling as more is shared (docs/decisions/0410-shared-statements.md).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "shared_lines.py"
CEILING = 171  # PostgreSQL lines that repeat their SQLite twin (349 before store/statements/, 164 after;
# 219 once store/model/ took the shared types out of the SQLite modules, as twin functions already alike came to
# stand next to each other; 171 with the snapshot reads, forget's checks and memory-file reads shared)

SQLITE_TWIN = """
def page(conn, after, limit):
    rows = conn.execute(
        "SELECT id, name FROM snapshots WHERE id > ? ORDER BY id LIMIT ?",
        (after, limit),
    ).fetchall()
    return [tuple(row) for row in rows]
"""


def count(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False)


def store(tmp_path: Path, postgres: str) -> Path:
    for backend, text in (("sqlite", SQLITE_TWIN), ("postgres", postgres)):
        (tmp_path / backend).mkdir()
        (tmp_path / backend / "snapshots.py").write_text(text)
    return tmp_path


def test_the_backends_share_no_more_lines_than_the_ceiling() -> None:
    done = count("--ceiling", str(CEILING))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_statement_spelt_twice_is_counted_whatever_its_names_and_placeholders(tmp_path: Path) -> None:
    copy = SQLITE_TWIN.replace("?", "%s").replace("page(", "snapshot_page(").replace("rows", "found")
    done = count("--store", str(store(tmp_path, copy)), "--ceiling", "0")
    assert done.returncode == 1
    assert done.stdout.startswith("6 PostgreSQL lines")


def test_a_different_statement_is_not_counted(tmp_path: Path) -> None:
    other = SQLITE_TWIN.replace("SELECT id, name FROM snapshots", "SELECT 1 FROM snapshots").replace(
        "[tuple(row) for row in rows]", "bool(rows)"
    )
    done = count("--store", str(store(tmp_path, other)), "--ceiling", "0")
    assert done.returncode == 0
    assert done.stdout.startswith("0 PostgreSQL lines")
