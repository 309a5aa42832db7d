"""Check the subjects of the commits not yet on main: at most 72 characters, then a blank line.

``make check`` runs it on the commits since ``origin/main`` (or, without that branch, since the newest tag),
so ``git log --oneline`` stays a list a person can scan. The contributing guide states the rule.
"""

from __future__ import annotations

import subprocess
import sys

LIMIT = 72


def git(*args: str) -> str | None:
    """git's output, or None when the command fails (no such branch, no tag, not a repository)."""
    done = subprocess.run(["git", *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def base() -> str | None:
    """Where the new commits start: the fork point from origin/main, else the newest tag."""
    if git("rev-parse", "--verify", "--quiet", "origin/main") is not None:
        return git("merge-base", "HEAD", "origin/main")
    return git("describe", "--tags", "--abbrev=0")


def problems(message: str) -> list[str]:
    lines = message.split("\n")
    subject = lines[0]
    found = []
    if len(subject) > LIMIT:
        found.append(f"subject is {len(subject)} characters (at most {LIMIT})")
    if subject.endswith("."):
        found.append("subject ends with a period")
    if len(lines) > 1 and lines[1].strip():
        found.append("no blank line between the subject and the body")
    return found


def main() -> int:
    start = base()
    if start is None:
        print("commit subjects: no origin/main and no tag to compare with; nothing checked")
        return 0
    listing = git("log", "--no-merges", "--format=%h%x00%B%x1e", f"{start}..HEAD") or ""
    bad = 0
    for record in filter(None, (r.strip("\n") for r in listing.split("\x1e"))):
        sha, _, message = record.partition("\x00")
        for problem in problems(message.strip("\n")):
            print(f"{sha} {message.splitlines()[0][:60]!r}: {problem}")
            bad += 1
    if bad:
        print("commit subjects: reword with `git rebase -i` (see CONTRIBUTING.md)", file=sys.stderr)
        return 1
    print(f"commit subjects: every commit since {start[:12]} follows the rule")
    return 0


if __name__ == "__main__":
    sys.exit(main())
