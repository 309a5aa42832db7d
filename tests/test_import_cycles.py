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
# Highest first: the composition root wires the jobs; the jobs use the history import, recall, embeddings and
# the store; the store keeps what capture made of a message. A lower layer never reaches a higher one.
LAYERS = ("sidecar", "service", "history", "recall", "embed", "store", "capture")
BACKENDS = (f"{PACKAGE}.store.sqlite", f"{PACKAGE}.store.postgres")
# Outside store/, a backend is reached through the ``Store`` handle (store/backend.py, the composition root that
# picks one) and its types through store/model/. These modules name a backend themselves, each for its reason:
NAMES_A_BACKEND = {
    f"{PACKAGE}.salvage": "reads a damaged SQLite file page by page and rebuilds one: SQLite by design",
    f"{PACKAGE}.doctor": "examines each backend's files and catalog below the seam: the damage is what it looks for",
    f"{PACKAGE}.cli_migrate": "migrate-store opens the two named backends it copies between",
    f"{PACKAGE}.embed.database_index": "the PostgreSQL store's own pgvector index, picked only on PostgreSQL",
    f"{PACKAGE}.history.readers": "reads the host's own SQLite files (not the store) with the store's binding",
    f"{PACKAGE}.history.gaps": "reads the host's own SQLite files (not the store) with the store's binding",
}


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


def backend_imports() -> list[str]:
    """Every direct import of a backend module the store's rule forbids: from one backend to the other, or from
    any other module but the composition root (``store/backend.py``) and the listed ones."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    allowed = (f"{PACKAGE}.store.backend", *NAMES_A_BACKEND)
    found = []
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            source, target = _backend_of(importer), _backend_of(imported)
            if target is None or source == target:
                continue
            if source is not None or not any(_within(importer, module) for module in allowed):
                found.append(f"{importer} -> {imported}")
    return found


def _backend_of(module: str) -> str | None:
    return next((backend for backend in BACKENDS if _within(module, backend)), None)


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_callers_reach_a_backend_only_through_the_store_handle_and_model() -> None:
    """A caller that imported ``store.sqlite.sessions`` for ``Scope`` would be SQLite's for ever, and a
    PostgreSQL module that borrowed a SQLite one could not change without it: the model is shared instead."""
    assert backend_imports() == []


def test_every_listed_exception_still_names_a_backend() -> None:
    """A module taken off the list's reason (it now goes through the handle) is taken off the list too."""
    graph = grimp.build_graph(PACKAGE, cache_dir=None)
    idle = [
        listed
        for listed in NAMES_A_BACKEND
        if not any(
            imported.startswith(BACKENDS)
            for module in graph.modules
            if _within(module, listed)
            for imported in graph.find_modules_directly_imported_by(module)
        )
    ]
    assert idle == []


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
