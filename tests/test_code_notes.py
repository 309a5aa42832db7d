"""The code says what and why in a few lines; its measurements live in docs/decisions/ (context, options
measured, decision, figures), and the code keeps one line and a link."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

ROOT = Path(__file__).parents[1]

MAX_MODULE_DOCSTRING_LINES = 25
# A measurement: "p95 31.8", "~45 ms", "51 → 41 ms", "137.7 ms against", "48 msg/s".
FIGURE = re.compile(
    r"\bp(?:50|95|99)\s*[:=~]?\s*\d"
    r"|~\s?\d[\d,.]*\s?(?:ms|µs|s)\b"
    r"|\d[\d,.]*\s?(?:ms|µs)?\s*(?:→|->)\s*\d[\d,.]*\s?(?:ms|µs)"
    r"|\d[\d,.]*\s?(?:ms|µs)\s+(?:against|before|vs\.?)\s+\d"
    r"|\d[\d,.]*\s?msg/s"
)


def _modules() -> list[Path]:
    return sorted((ROOT / "openclaw_lossless").rglob("*.py"))


def _prose(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and docstring-like string of a module."""
    lines: list[tuple[int, str]] = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        is_docstring = tok.type == tokenize.STRING and tok.string.lstrip("rbuRBU").startswith(('"""', "'''"))
        if tok.type == tokenize.COMMENT or is_docstring:
            lines += [(tok.start[0] + i, text) for i, text in enumerate(tok.string.splitlines())]
    return lines


def test_module_docstrings_are_short() -> None:
    long = []
    for path in _modules():
        doc = ast.get_docstring(ast.parse(path.read_text()), clean=False) or ""
        if len(doc.splitlines()) > MAX_MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(ROOT)}: {len(doc.splitlines())} lines")
    assert not long, f"module docstrings over {MAX_MODULE_DOCSTRING_LINES} lines (essays go to docs/decisions/): {long}"


def test_no_benchmark_figures_in_code_comments() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{line}: {text.strip()}"
        for path in _modules()
        for line, text in _prose(path.read_text())
        if FIGURE.search(text)
    ]
    assert not found, "measurements belong in docs/decisions/NNNN-*.md, the code keeps a link:\n" + "\n".join(found)


def test_the_figure_check_catches_measurements() -> None:
    caught = ["p50 31.8 → 17.9 ms", "took ~45 ms each", "keyword query p50 136 ms", "48 msg/s on one core"]
    passed = ["deadline 400 ms", "the p50 and p95 per minute", "from 0.25 ms to 16 s", "score × (1 + boost)"]
    assert all(FIGURE.search(text) for text in caught)
    assert not any(FIGURE.search(text) for text in passed)
