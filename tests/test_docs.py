"""The docs keep up with the code: every CLI command, HTTP endpoint and setting is in the docs site, every page
is in its navigation, and the README stays a front door."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from docs import gen_reference
from openclaw_lossless.cli.main import build_parser
from openclaw_lossless.config import Settings

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()


def test_every_cli_command_is_in_the_docs() -> None:
    listed = [name for name, _ in gen_reference.commands(build_parser())]
    assert {"serve", "search", "recover", "snapshot create", "import", "export", "pack", "doctor"} <= set(listed)
    page = gen_reference.cli_markdown()
    leaves = [name for name, sub in gen_reference.commands(build_parser()) if not gen_reference.commands(sub)]
    missing = [name for name in leaves if f"### `{name}`" not in page or f"usage: openclaw-lossless {name}" not in page]
    assert not missing, f"commands missing from the command-line page: {missing}"


def test_every_setting_is_in_the_docs() -> None:
    page = gen_reference.settings_markdown()
    rows = {m.group(1) for m in re.finditer(r"^\| (\w+)(?:<br>[^|]*)? \|", page, re.M)}
    missing = [name for name in Settings.model_fields if name not in rows]
    assert not missing, f"settings missing from the configuration page: {missing}"
    assert "| retrieval_count<br>plugin: `retrievalCount` | `LOSSLESS_RETRIEVAL_COUNT` |" in page
    assert "`OPENAI_API_KEY`" in page  # a setting named by its alias, not LOSSLESS_<FIELD>
    assert "| port | `LOSSLESS_PORT`, `--port` | 8377 (≥ 0, ≤ 65535) |" in page


def test_every_http_endpoint_is_in_the_docs() -> None:
    schema = gen_reference.openapi()
    page = gen_reference.http_markdown()
    ops = gen_reference.endpoints(schema)
    assert ("GET", "/v1/search") in {(method, path) for method, path, _ in ops}
    missing = [f"{method} {path}" for method, path, _ in ops if f"| `{method} {path}` |" not in page]
    assert not missing, f"endpoints missing from the HTTP API page: {missing}"


def test_a_setting_without_a_note_fails_the_build(monkeypatch: pytest.MonkeyPatch) -> None:
    notes = gen_reference._notes("settings")
    del notes["port"]
    monkeypatch.setattr(gen_reference, "_notes", lambda name: notes)
    with pytest.raises(gen_reference.MissingNote, match="port"):
        gen_reference.settings_markdown()


def _nav_pages() -> set[str]:
    text = (ROOT / "mkdocs.yml").read_text()
    return set(re.findall(r":\s*([\w/.-]+\.md)\s*$", text, re.M))


def test_every_page_is_in_the_navigation() -> None:
    nav = _nav_pages()
    records = re.compile(r"^decisions/\d{4}-")
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    pages = {page for page in pages if not records.match(page)}
    assert not nav - pages, f"the navigation names pages that do not exist: {sorted(nav - pages)}"
    assert not pages - nav, f"pages missing from the navigation in mkdocs.yml: {sorted(pages - nav)}"


def test_every_decision_record_is_listed() -> None:
    records = sorted(p.name for p in (DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    listed = gen_reference.decisions_markdown()
    assert records, "docs/decisions/ holds no record"
    assert all(f"]({name})" in listed for name in records)
    numbers = [name[:4] for name in records]
    assert len(numbers) == len(set(numbers)), "two decision records share a number"


def test_the_readme_is_a_front_door() -> None:
    assert len(README.splitlines()) <= 200
    assert "make serve" in README and "make test" in README
    for target in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / target).exists(), f"the README links to {target}, which does not exist"
