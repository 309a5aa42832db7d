"""One name for each module: two modules of the package share a name only when they are backend twins.

Why it matters to a maintainer: a name is how a newcomer finds a room. Two ``gaps.py`` with different jobs send
them to the wrong one. The one exception is twins, one domain's job on each backend: the same path under
``store/sqlite/`` and ``store/postgres/``, under ``store/statements/`` for the statements both share, and under
``store/model/`` for the domain's types both use (``store/sqlite/agents.py``, ``store/postgres/agents.py`` and
``store/statements/agents.py``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

PACKAGE = Path(__file__).resolve().parents[1] / "openclaw_lossless"
BACKENDS = ("store/sqlite/", "store/postgres/", "store/statements/", "store/model/")


def shared_names(package: Path) -> dict[str, list[str]]:
    """Each module name held by more than one module that is not its twin, with the modules' paths."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for path in package.rglob("*.py"):
        if path.name == "__init__.py":
            continue
        relative = path.relative_to(package).as_posix()
        by_name[path.stem].add(_twin_key(relative))
    return {name: sorted(places) for name, places in sorted(by_name.items()) if len(places) > 1}


def _twin_key(relative: str) -> str:
    """A backend module, its twin on the other backend and their shared statements count as one place."""
    for prefix in BACKENDS:
        if relative.startswith(prefix):
            return "store/<backend>/" + relative[len(prefix) :]
    return relative


def test_no_two_modules_share_a_name_unless_they_are_backend_twins() -> None:
    assert shared_names(PACKAGE) == {}


def test_the_check_finds_a_shared_name_and_lets_twins_pass(tmp_path: Path) -> None:
    """The check itself can fail: two ``gaps.py`` in different rooms are found; backend twins are not."""
    twins = ("store/sqlite/timeline.py", "store/postgres/timeline.py", "store/statements/timeline.py")
    for relative in ("doctor/gaps.py", "history/gaps.py", *twins):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text('"""A module."""\n')
    assert shared_names(tmp_path) == {"gaps": ["doctor/gaps.py", "history/gaps.py"]}
    (tmp_path / "ui/timeline.py").parent.mkdir()
    (tmp_path / "ui/timeline.py").write_text('"""A module."""\n')
    assert shared_names(tmp_path) == {
        "gaps": ["doctor/gaps.py", "history/gaps.py"],
        "timeline": ["store/<backend>/timeline.py", "ui/timeline.py"],
    }
