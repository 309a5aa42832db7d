"""scripts/check_commits.py, which ``make check`` runs: it flags the subjects that break the rule, only those."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "check_commits.py"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def commit(repo: Path, message: str) -> None:
    (repo / "file.txt").write_text(message, encoding="utf-8")
    git(repo, "add", "file.txt")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", message)


def check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT)], cwd=repo, capture_output=True, text=True, check=False)


def test_only_the_new_commits_are_held_to_the_rule(tmp_path: Path) -> None:
    upstream, clone = tmp_path / "upstream", tmp_path / "clone"
    git(tmp_path, "init", "-q", "-b", "main", str(upstream))
    commit(upstream, "an old subject that rambles on " + "and on " * 12)  # already on main: not judged
    git(tmp_path, "clone", "-q", str(upstream), str(clone))
    assert check(clone).returncode == 0
    commit(clone, "Index unspaced text as bigrams\n\nWhy, with the figures.")
    done = check(clone)
    assert done.returncode == 0, done.stdout
    commit(clone, "Add a subject that is far too long to scan in git log --oneline output, really")
    commit(clone, "End with a period.")
    commit(clone, "Run on without a blank line\nbody right away")
    done = check(clone)
    assert done.returncode == 1
    assert "subject is 78 characters (at most 72)" in done.stdout
    assert "ends with a period" in done.stdout and "no blank line" in done.stdout
    assert "Index unspaced" not in done.stdout and "rambles" not in done.stdout
