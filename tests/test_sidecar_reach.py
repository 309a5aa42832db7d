"""No module outside the composition root reaches through the ``Sidecar`` into a part of a part.

Why it matters to a maintainer: ``sidecar.ops.forgetting.run(...)`` or ``sidecar.db.reader()`` in a route ties
the route to how the sidecar is assembled, so rewiring one part breaks code that seemed unrelated. A route
asks for the part it uses (``api/deps.py``: ``StoreDep``, ``QueriesDep``, ...; ``api/forget.py``:
``ForgetParts``) and a function is handed that part; one step into the sidecar (``sidecar.store``) is where
that happens. The composition root (``sidecar.py``, which builds the parts, and ``app.py``, which starts them
with the server) is exempt. The check reads the source (``ast``), so no module is executed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

PACKAGE = Path(__file__).resolve().parent.parent / "openclaw_lossless"
COMPOSITION_ROOT = frozenset({"sidecar.py", "app.py"})


def _sidecar_names(tree: ast.AST) -> set[str]:
    """The names that hold a sidecar: ``sidecar`` itself, and any parameter or variable annotated ``Sidecar``."""
    names = {"sidecar"}
    for node in ast.walk(tree):
        if isinstance(node, ast.arg | ast.AnnAssign) and node.annotation is not None:
            target = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", None)
            if target is not None and "Sidecar" in ast.unparse(node.annotation).split("[")[0].split("|")[0]:
                names.add(target)
    return names


def _is_sidecar(node: ast.expr, names: set[str]) -> bool:
    """``sidecar``, a name annotated ``Sidecar``, or any ``<something>.sidecar`` (``app.state.sidecar``)."""
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr == "sidecar"
    )


def deep_reaches(source: str) -> list[str]:
    """Each ``<sidecar>.<part>.<attribute>`` in ``source``, with its line."""
    if "sidecar" not in source.lower():  # no name can hold one: skip the parse
        return []
    tree = ast.parse(source)
    names = _sidecar_names(tree)
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and _is_sidecar(node.value.value, names)
        ):
            found.append((node.lineno, ast.unparse(node)))
    return [f"{line}: {text}" for line, text in sorted(found)]


def test_no_module_outside_the_composition_root_reaches_two_attributes_into_the_sidecar() -> None:
    found = {
        str(path.relative_to(PACKAGE)): reaches
        for path in sorted(PACKAGE.rglob("*.py"))
        if path.relative_to(PACKAGE).as_posix() not in COMPOSITION_ROOT
        and (reaches := deep_reaches(path.read_text(encoding="utf-8")))
    }
    assert found == {}


def test_the_check_finds_a_reach_through_any_name_that_holds_a_sidecar() -> None:
    """The check itself can fail: the shapes such a reach takes, and the one-step uses it lets through."""
    source = (
        "def route(sidecar, car: Sidecar, request):\n"
        "    sidecar.ops.forgetting.run()\n"
        "    car.db.reader()\n"
        "    request.app.state.sidecar.queries.search()\n"
        "    store = sidecar.store\n"
        "    store.ops.backlog.size(store.db.reader())\n"
    )
    assert deep_reaches(source) == [
        "2: sidecar.ops.forgetting",
        "3: car.db.reader",
        "4: request.app.state.sidecar.queries.search",
    ]
