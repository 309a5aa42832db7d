"""Count the PostgreSQL lines that repeat their SQLite twin: runs of 6+ lines alike once names are ignored.

Each line is normalised: blank and comment lines dropped, whitespace stripped, placeholders (``?``, ``%s``,
``:name``, ``%(name)s``) made one, and every identifier that is not a Python keyword or an upper-case word
(SQL's keywords, constants) made one. Imports, ``__all__`` and names bound to a shared definition
(``x = _SHARED.x``) are left out: with names ignored, any two lists of six names are alike, and naming a
definition kept once is not spelling it twice. A PostgreSQL line counts when it sits in a run of ``RUN``
normalised lines that also occurs anywhere in the SQLite tree (its twin or another module). Statements both
backends run alike belong in ``store/statements/``; this says how much is still spelt twice.

Usage: ``python scripts/shared_lines.py [--ceiling N] [--by-file] [--store DIR]``; fails above the ceiling.
"""

from __future__ import annotations

import argparse
import ast
import keyword
import re
import sys
from collections.abc import Iterator
from pathlib import Path

RUN = 6
STORE = Path(__file__).resolve().parent.parent / "openclaw_lossless" / "store"
_PLACEHOLDER = re.compile(r"%\(\w+\)s|%s|(?<![:\w]):[A-Za-z_]\w*|\?")
_NAME = re.compile(r"[A-Za-z_]\w*")


def _name(match: re.Match[str]) -> str:
    word = match.group(0)
    return word if keyword.iskeyword(word) or word.isupper() else "N"


def normalise(line: str) -> str | None:
    """The line as compared, or None for a line that says nothing (blank, comment)."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    return _NAME.sub(_name, _PLACEHOLDER.sub("?", text))


def lines_of(path: Path) -> list[tuple[int, str]]:
    """(line number, normalised text) of each line that says something, imports and ``__all__`` left out."""
    source = path.read_text()
    names = set(_name_lists(ast.parse(source)))
    numbered = ((number, normalise(text)) for number, text in enumerate(source.splitlines(), 1))
    return [(number, text) for number, text in numbered if text is not None and number not in names]


def _name_lists(tree: ast.Module) -> Iterator[int]:
    """The line numbers of the imports, of ``__all__`` and of the names bound to a shared definition."""
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt) and _lists_names(node):
            yield from range(node.lineno, (node.end_lineno or node.lineno) + 1)


def _lists_names(node: ast.stmt) -> bool:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name, value = node.targets[0].id, node.value
        return name == "__all__" or (isinstance(value, ast.Attribute) and value.attr == name.lstrip("_"))
    return isinstance(node, (ast.Import, ast.ImportFrom))


def windows(lines: list[tuple[int, str]]) -> Iterator[tuple[int, tuple[str, ...]]]:
    for start in range(len(lines) - RUN + 1):
        yield start, tuple(text for _, text in lines[start : start + RUN])


def shared(store: Path = STORE) -> dict[str, int]:
    """Per PostgreSQL module (path under store/postgres), its lines inside a run its SQLite twins also hold."""
    seen = {window for path in sorted((store / "sqlite").rglob("*.py")) for _, window in windows(lines_of(path))}
    counts: dict[str, int] = {}
    for path in sorted((store / "postgres").rglob("*.py")):
        lines = lines_of(path)
        covered: set[int] = set()
        for start, window in windows(lines):
            if window in seen:
                covered.update(number for number, _ in lines[start : start + RUN])
        counts[str(path.relative_to(store / "postgres"))] = len(covered)
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ceiling", type=int, help="fail when more lines than this are shared")
    parser.add_argument("--by-file", action="store_true", help="list the count of each PostgreSQL module")
    parser.add_argument("--store", type=Path, default=STORE, help="the folder holding sqlite/ and postgres/")
    args = parser.parse_args(argv)
    counts = shared(args.store)
    if args.by_file:
        for name, count in sorted(counts.items(), key=lambda item: -item[1]):
            if count:
                print(f"{count:5d}  {name}")
    total = sum(counts.values())
    print(f"{total} PostgreSQL lines repeat their SQLite twin (runs of {RUN}+ lines, names ignored)")
    if args.ceiling is not None and total > args.ceiling:
        print(f"above the ceiling of {args.ceiling}: share the statement in store/statements/", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
