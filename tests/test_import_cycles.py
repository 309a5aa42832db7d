"""The package's modules import each other without a cycle, and its layers import only downwards.

Why it matters to a user: a cycle is where a change to one part breaks another that seemed unrelated (the
sidecar and the history import each called the other; the CLI and the MCP server borrowed each other's
helpers). Every import counts, also one under ``TYPE_CHECKING`` and one inside a function: a cycle hidden
from the interpreter is still a cycle a reader has to untangle. grimp reads the import statements, so no
module is executed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grimp
import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

PACKAGE = "openclaw_lossless"
# Highest first: the composition root wires the jobs; the jobs use the transcript reading, recall, embeddings and
# the store; the store keeps what capture made of a message. A lower layer never reaches a higher one.
LAYERS = ("sidecar", "service", "transcripts", "recall", "embed", "store", "capture")


def import_cycles(package: str) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a loop (Tarjan's strongly connected
    components of the import graph; a group of one is no cycle)."""
    graph = grimp.build_graph(package, cache_dir=None)
    imports = {module: sorted(graph.find_modules_directly_imported_by(module)) for module in graph.modules}
    order: dict[str, int] = {}
    lowest: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        order[module] = lowest[module] = len(order)
        stack.append(module)
        for imported in imports[module]:
            if imported not in order:
                visit(imported)
                lowest[module] = min(lowest[module], lowest[imported])
            elif imported in stack:
                lowest[module] = min(lowest[module], order[imported])
        if lowest[module] == order[module]:
            group = stack[stack.index(module) :]
            del stack[stack.index(module) :]
            if len(group) > 1:
                cycles.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(imports)))
    try:
        for module in sorted(imports):
            if module not in order:
                visit(module)
    finally:
        sys.setrecursionlimit(limit)
    return cycles


def test_the_package_has_no_import_cycle() -> None:
    assert import_cycles(PACKAGE) == []


def test_a_lower_layer_never_imports_a_higher_one() -> None:
    """Directly or through another module: capture parses messages for the store and never reaches into it."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    illegal = graph.find_illegal_dependencies_for_layers(layers=tuple(f"{PACKAGE}.{layer}" for layer in LAYERS))
    assert sorted(f"{d.importer} -> {d.imported}" for d in illegal) == []


def test_a_cycle_is_found_also_when_it_hides_under_type_checking_or_in_a_function(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check itself can fail: the two shapes the sidecar's cycles had, in a package made for the test."""
    package = tmp_path / "cyclic_example"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "root.py").write_text("from cyclic_example import parts\n")
    (package / "parts.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from cyclic_example.root import Root\n"
    )
    (package / "lazy.py").write_text("def later():\n    from cyclic_example import root\n")
    (package / "alone.py").write_text("import json\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles("cyclic_example") == [["cyclic_example.parts", "cyclic_example.root"]]
    (package / "root.py").write_text("from cyclic_example import lazy, parts\n")
    assert import_cycles("cyclic_example") == [["cyclic_example.lazy", "cyclic_example.parts", "cyclic_example.root"]]
