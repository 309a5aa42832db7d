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
# The whole package, highest first: every module belongs to the most specific entry naming it (a package or a
# module), and imports only its own layer or lower ones. The front ends (CLI, web UI, HTTP API, doctor,
# salvage, /metrics) use the composition root, which wires the jobs; the jobs use the host's transcripts,
# recall, embeddings and the store; the store keeps what capture made of a message; config and errors are
# under everything. The few modules named apart from their room sit elsewhere in the order: ``observe`` keeps
# its instruments (fed by the jobs) low and its ``/metrics`` exposition (which reads the whole sidecar) high;
# the memory files' record shape sits under the store, whose export writes it; the host's config reader
# (``doctor.host_config``) sits low, since the memory files and the CLI read the host's config too
# (docs/decisions/0420-rooms-by-job.md).
LAYERS = (
    "__main__",
    "cli",
    "app",
    "ui",
    "api",
    "doctor",
    "salvage",
    "observe.prometheus",
    "rescan",
    "reindex",
    "sidecar",
    "service",
    "memory_files",
    "transcripts",
    "observe",
    "recall",
    "embed",
    "store",
    "memory_files.chunk_records",
    "listeners",
    "auth_token",
    "config",
    "capture",
    "doctor.host_config",
    "timeexpr",
    "selection",
    "errors",
    "",  # the package's __init__: its version
)
BACKENDS = (f"{PACKAGE}.store.sqlite", f"{PACKAGE}.store.postgres")
# Outside store/, a backend is reached through the ``Store`` handle (store/backend.py, the composition root that
# picks one) and its types through store/model/. These modules name a backend themselves, each for its reason:
NAMES_A_BACKEND = {
    f"{PACKAGE}.salvage": "reads a damaged SQLite file page by page and rebuilds one: SQLite by design",
    f"{PACKAGE}.doctor": "examines each backend's files and catalog below the seam: the damage is what it looks for",
    f"{PACKAGE}.cli.migrate": "migrate-store opens the two named backends it copies between",
    f"{PACKAGE}.embed.database_index": "the PostgreSQL store's own pgvector index, picked only on PostgreSQL",
    f"{PACKAGE}.transcripts.readers": "reads the host's own SQLite files (not the store) with the store's binding",
    f"{PACKAGE}.transcripts.gaps": "reads the host's own SQLite files (not the store) with the store's binding",
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


def layer_of(module: str, package: str, layers: tuple[str, ...]) -> int | None:
    """The index in ``layers`` of the most specific entry naming ``module`` (None: no entry does)."""
    best: tuple[int, int] | None = None  # (length of the entry's name, its index)
    for index, entry in enumerate(layers):
        name = f"{package}.{entry}" if entry else package
        if (module == name or module.startswith(f"{name}.")) and (best is None or len(name) > best[0]):
            best = (len(name), index)
    return None if best is None else best[1]


def layer_violations(package: str, layers: tuple[str, ...]) -> list[str]:
    """Each module no layer names, and each import from a lower layer to a higher one. Direct imports suffice:
    when every one goes down or stays in its layer, so does every chain of them."""
    graph = grimp.build_graph(package, cache_dir=None)
    found = []
    for module in sorted(graph.modules):
        own = layer_of(module, package, layers)
        if own is None:
            found.append(f"{module} is in no layer")
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            theirs = layer_of(imported, package, layers)
            if theirs is not None and theirs < own:
                found.append(f"{module} -> {imported}")
    return found


def test_every_module_has_a_layer_and_a_lower_layer_never_imports_a_higher_one() -> None:
    """Directly or through another module: capture parses messages for the store and never reaches into it;
    the jobs never reach the routes or the CLI."""
    assert layer_violations(PACKAGE, LAYERS) == []


def test_the_layer_check_finds_an_upward_import_and_a_module_without_a_layer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check itself can fail, in a package made for the test."""
    package = tmp_path / "layered_example"
    (package / "low").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "low" / "__init__.py").write_text("")
    (package / "low" / "parts.py").write_text("def later():\n    from layered_example import high\n")
    (package / "high.py").write_text("from layered_example.low import parts\n")
    (package / "stray.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert layer_violations("layered_example", ("high", "low")) == [
        "layered_example is in no layer",
        "layered_example.low.parts -> layered_example.high",
        "layered_example.stray is in no layer",
    ]
    assert layer_violations("layered_example", ("high", "low", "")) == [
        "layered_example.low.parts -> layered_example.high"
    ]


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
