"""The reference pages, written from the code so they cannot drift: settings, command line and HTTP API.

The names, variables, flags, defaults and bounds come from ``Settings``, the argparse parser and the app's
OpenAPI schema; what each one means comes from the notes in ``docs/reference/*.toml``, and a setting, command
or endpoint without a note fails the build (``MissingNote``). ``docs/hooks.py`` puts the pages into the site;
``tests/test_docs.py`` checks them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
NOTES = DOCS / "reference"


class MissingNote(Exception):
    """A setting, command or endpoint the code has and the notes do not (or the other way round)."""


def _notes(name: str) -> dict[str, dict[str, str]]:
    with (NOTES / f"{name}.toml").open("rb") as f:
        notes: dict[str, dict[str, str]] = tomllib.load(f)
    return notes


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _check(kind: str, code: set[str], notes: set[str]) -> None:
    missing, stale = sorted(code - notes), sorted(notes - code)
    if missing or stale:
        raise MissingNote(
            f"{kind}: add a note to docs/reference/ for {missing}" * bool(missing)
            + f"{kind}: remove the notes of {stale}, which the code no longer has" * bool(stale)
        )


# ---- settings ----------------------------------------------------------------------------------------------


def _plugin_names() -> dict[str, str]:
    """The plugin config's camelCase name of each per-request setting (``RecallOverrides``' aliases)."""
    from openclaw_lossless.config import RecallOverrides

    names = {name: field.alias for name, field in RecallOverrides.model_fields.items() if field.alias}
    names["max_db_size_mb"] = "maxDbSizeMb"
    return names


def _serve_flags() -> dict[str, str]:
    from openclaw_lossless.cli.main import build_parser

    flags: dict[str, str] = {}
    for action in _subparser(build_parser(), "serve")._actions:
        if action.option_strings and action.dest not in ("help",):
            flags[action.dest] = max(action.option_strings, key=len)
    return flags


def _env_names(name: str, field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    choices = getattr(alias, "choices", None)
    if choices:
        return [str(choice) for choice in choices if isinstance(choice, str)][:1]
    return [f"LOSSLESS_{name.upper()}"]


def _bounds(field: FieldInfo) -> str:
    words = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    found = [f"{words[key]} {getattr(meta, key)}" for meta in field.metadata for key in words if hasattr(meta, key)]
    return ", ".join(found)


def _default(name: str, field: FieldInfo, note: dict[str, str]) -> str:
    """The code's default; the note's words only where the code computes it or leaves it unset."""
    value = field.default
    if field.default_factory is not None or value is None:
        if field.default_factory is list and "default" not in note:
            return "[]"
        if field.default_factory is not None and "default" not in note:
            raise MissingNote(f"setting {name}: its default is computed; say it as `default` in settings.toml")
        return note.get("default", "—")
    if "default" in note:
        raise MissingNote(f"setting {name}: the code says its default ({value!r}); drop `default` from the note")
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and value >= 2**20 and value % 2**20 == 0:
        return f"{value // 2**20} MiB"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def settings_markdown() -> str:
    """Every setting of ``Settings``: name (and the plugin's name), variable and flag, default and bounds, meaning."""
    from openclaw_lossless.config import Settings

    notes = _notes("settings")
    _check("settings", set(Settings.model_fields), set(notes))
    plugin, flags = _plugin_names(), _serve_flags()
    rows = ["| setting | environment, `serve` flag | default | meaning |", "|---|---|---|---|"]
    for name, field in Settings.model_fields.items():
        note = notes[name]
        where = [f"`{var}`" for var in _env_names(name, field)] + ([f"`{flags[name]}`"] if name in flags else [])
        setting = f"{name}<br>plugin: `{plugin[name]}`" if name in plugin else name
        bounds = f" ({_bounds(field)})" if _bounds(field) else ""
        rows.append(
            f"| {setting} | {', '.join(where)} | {_cell(_default(name, field, note))}{bounds} "
            f"| {_cell(note['meaning'])} |"
        )
    return "\n".join(rows) + "\n"


def plugin_config_markdown() -> str:
    """Every key of the plugin's config schema in ``plugin-manifest.json``, with its default and description."""
    schema = json.loads((ROOT / "plugin-manifest.json").read_text())["config"]
    rows = ["| key | type | default | what |", "|---|---|---|---|"]
    for key, spec in schema["properties"].items():
        kind = spec.get("type", "")
        if "enum" in spec:
            kind = " | ".join(f"`{value}`" for value in spec["enum"])
        default = json.dumps(spec["default"]) if "default" in spec else "—"
        what = spec.get("description", "")
        if spec.get("properties"):
            inner = ", ".join(
                f"`{sub}` ({json.dumps(sub_spec.get('default'))}): {sub_spec.get('description', '')}".rstrip(": ")
                for sub, sub_spec in spec["properties"].items()
            )
            what = f"{what} {inner}".strip()
        rows.append(f"| `{key}` | {_cell(str(kind))} | `{_cell(default)}` | {_cell(what)} |")
    return "\n".join(rows) + "\n"


# ---- command line ------------------------------------------------------------------------------------------


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            sub: argparse.ArgumentParser = action.choices[name]
            return sub
    raise KeyError(name)


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand of the parser, in the parser's order, with its own parser."""
    found: list[tuple[str, argparse.ArgumentParser]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append((f"{prefix}{name}", sub))
                found += commands(sub, f"{prefix}{name} ")
    return found


def _help(parser: argparse.ArgumentParser, prog: str) -> str:
    """The parser's ``--help`` as a user sees it, at the same width on every machine."""
    parser.prog = prog
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "110"
    try:
        return parser.format_help().rstrip()
    finally:
        if previous is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = previous


def cli_markdown() -> str:
    """One section per command: what it does (the notes) and its ``--help``, as the parser prints it."""
    from openclaw_lossless.cli.main import build_parser

    parser = build_parser()
    found = commands(parser)
    notes = _notes("commands")
    leaves = {name for name, sub in found if not commands(sub)}
    _check("commands", leaves, set(notes))
    parts = ["```text", _help(parser, "openclaw-lossless"), "```", ""]
    for name, sub in found:
        if name not in leaves:
            continue
        note = notes[name]
        parts += [f"### `{name}`", "", note["what"], ""]
        if "usage" in note:
            parts += [f"For example: `{note['usage']}`.", ""]
        parts += ["```text", _help(sub, f"openclaw-lossless {name}"), "```", ""]
    return "\n".join(parts)


# ---- HTTP API ----------------------------------------------------------------------------------------------


def openapi() -> dict[str, Any]:
    """The app's own OpenAPI schema, from an app on a throwaway state directory (nothing is served)."""
    from openclaw_lossless.app import create_app
    from openclaw_lossless.config import Settings

    with tempfile.TemporaryDirectory() as state:
        schema: dict[str, Any] = create_app(Settings(state_dir=Path(state))).openapi()
    return schema


def _key(method: str, path: str) -> str:
    return f"{method.upper()} {re.sub(r'{[^}]+}', '{}', path)}"


def endpoints(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(method, path, operation) of every operation in the schema, in its order."""
    return [(method.upper(), path, op) for path, ops in schema["paths"].items() for method, op in ops.items()]


def _params(op: dict[str, Any]) -> str:
    found = []
    for param in op.get("parameters", []):
        if param["in"] == "header":
            continue
        kind = param.get("schema", {}).get("type") or "any"
        need = "required" if param.get("required") else "optional"
        found.append(f"`{param['name']}` ({param['in']}, {kind}, {need})")
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    if "$ref" in body:
        found.append(f"JSON body `{body['$ref'].rsplit('/', 1)[-1]}`")
    return ", ".join(found)


def http_markdown() -> str:
    """Every operation of the OpenAPI schema: method and path, parameters, answers, and what it does."""
    schema = openapi()
    notes = _notes("endpoints")
    by_key = {_key(*key.split(" ", 1)): note for key, note in notes.items() if " " in key}
    ops = endpoints(schema)
    routes = {_key(method, path) for method, path, _ in ops if "/hooks/" not in path}
    outside = {"GET /metrics", "GET /ui"}  # served beside the schema: /ui is a browser's, /metrics a scraper's
    _check("endpoints", routes | outside, set(by_key))
    rows = ["| endpoint | parameters | answers | what |", "|---|---|---|---|"]
    hooks = ["| hook | body | answers | what |", "|---|---|---|---|"]
    for method, path, op in ops:
        answers = ", ".join(sorted(op.get("responses", {})))
        if "/hooks/" in path:
            what = op.get("summary", "")
            hooks.append(f"| `{method} {path}` | {_cell(_params(op))} | {answers} | {_cell(what)} |")
            continue
        what = by_key[_key(method, path)]["what"]
        rows.append(f"| `{method} {path}` | {_cell(_params(op))} | {answers} | {_cell(what)} |")
    for key in sorted(outside):
        rows.append(f"| `{key}` | | | {_cell(by_key[key]['what'])} |")
    intro = notes["hooks"]["what"]
    return "\n".join([*rows, "", f"The hooks ({intro}), as the schema states them:", "", *hooks]) + "\n"


# ---- design decisions --------------------------------------------------------------------------------------


def decisions_markdown() -> str:
    """A list of the decision records in ``docs/decisions/``, from the files there, with their titles."""
    rows = []
    for path in sorted((DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md")):
        first = path.read_text().splitlines()[0] if path.read_text() else path.stem
        title = first.lstrip("# ").strip() or path.stem
        rows.append(f"- [{title}]({path.name})")
    return "\n".join(rows) + "\n"


GENERATED = {
    "settings": settings_markdown,
    "plugin-config": plugin_config_markdown,
    "cli": cli_markdown,
    "http": http_markdown,
    "decisions": decisions_markdown,
}
