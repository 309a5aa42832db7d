"""Is the plugin wired in: the context-engine slot, its entry, its install, its version, its config values.

Each check reads only the config (and, for the install, the files ``openclaw plugins install`` leaves): a
linked install (``-l``) adds the plugin's directory to ``plugins.load.paths`` and records it in the host's
install index (``<state>/state/openclaw.sqlite``, table ``config_machine_state``, key
``plugins.installedIndex``); a copied install lives in ``<state>/extensions/<dir>``.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

import openclaw_lossless
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.host_config import HostConfig

ENGINE_ID = "lossless"
PLUGIN_MANIFEST = "openclaw.plugin.json"
INSTALL_INDEX_KEY = "plugins.installedIndex"
RESTART = "then restart the gateway (openclaw gateway restart)"


@dataclass(frozen=True)
class InstalledPlugin:
    path: Path
    how: str
    version: str | None
    manifest: dict[str, Any]


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def plugins_section(host: HostConfig) -> dict[str, Any]:
    return _obj(host.data.get("plugins"))


def entry_of(host: HostConfig) -> dict[str, Any] | None:
    entry = _obj(plugins_section(host).get("entries")).get(ENGINE_ID)
    return entry if isinstance(entry, dict) else None


def entry_config(host: HostConfig) -> dict[str, Any]:
    return _obj(_obj(entry_of(host)).get("config"))


def slot(host: HostConfig) -> Finding:
    value = _obj(plugins_section(host).get("slots")).get("contextEngine")
    if value == ENGINE_ID:
        return Finding("context-engine-slot", True, 'plugins.slots.contextEngine is "lossless"', code="slot_ok")
    shown = "not set, so the built-in engine runs" if value is None else f'{json.dumps(value)}, not "lossless"'
    return Finding(
        "context-engine-slot",
        False,
        f"plugins.slots.contextEngine in {host.location.config_path} is {shown}: nothing is stored or recalled",
        f"openclaw config set plugins.slots.contextEngine {ENGINE_ID} (a running gateway applies it at once)",
        code="slot_not_lossless",
        data={"value": value},
    )


def entry(host: HostConfig) -> Finding:
    """The plugin may load at all: plugins on, not denied, allowed if there is an allowlist, entry enabled."""
    plugins, path = plugins_section(host), host.location.config_path
    entry_value = entry_of(host)
    enable = f"openclaw plugins enable {ENGINE_ID} (it sets plugins.entries.{ENGINE_ID}.enabled to true), {RESTART}"
    problems: list[tuple[str, str, str]] = []
    if plugins.get("enabled") is False:
        problems.append(("plugins_disabled", "plugins.enabled is false", "openclaw config set plugins.enabled true"))
    deny = plugins.get("deny")
    if isinstance(deny, list) and ENGINE_ID in deny:
        problems.append(("plugin_denied", 'plugins.deny lists "lossless"', f"edit {path}: remove it"))
    allow = plugins.get("allow")
    if isinstance(allow, list) and allow and ENGINE_ID not in allow:
        problems.append(("plugin_not_allowed", 'plugins.allow omits "lossless"', f"edit {path}: add it"))
    if entry_value is None:
        problems.append(("entry_missing", "plugins.entries.lossless is missing", enable))
    elif entry_value.get("enabled") is False:
        problems.append(("entry_disabled", "plugins.entries.lossless.enabled is false", enable))
    if not problems:
        return Finding("plugin-entry", True, "plugins.entries.lossless is enabled", code="entry_ok")
    code, _, fix = problems[0]
    detail = f"{'; '.join(text for _, text, _ in problems)} (in {path}): the plugin does not load"
    return Finding("plugin-entry", False, detail, fix, code=code, data={"problems": [c for c, _, _ in problems]})


def find_install(host: HostConfig) -> tuple[InstalledPlugin | None, list[str]]:
    """Where the gateway loads the plugin from, in OpenClaw's precedence; and the places named but broken."""
    broken: list[str] = []
    state = host.location.state_dir
    paths = _obj(plugins_section(host).get("load")).get("paths")
    for raw in paths if isinstance(paths, list) else []:
        if isinstance(raw, str):
            found = _plugin_at(_expand(raw, host.location.config_path.parent), "plugins.load.paths")
            if found is not None:
                return found, broken
    record = _install_record(state) or _obj(_obj(plugins_section(host).get("installs")).get(ENGINE_ID))
    install_path = record.get("installPath") if isinstance(record.get("installPath"), str) else None
    if install_path:
        found = _plugin_at(Path(install_path), "install record")
        if found is not None:
            return found, broken
        broken.append(f"the install record names {install_path}, which holds no {ENGINE_ID} plugin")
    extensions = state / "extensions"
    for directory in sorted(extensions.iterdir()) if extensions.is_dir() else []:
        found = _plugin_at(directory, "extensions")
        if found is not None:
            return found, broken
    return None, broken


def _expand(raw: str, base: Path) -> Path:
    path = Path(raw).expanduser()
    return path if path.is_absolute() else base / path


def _plugin_at(path: Path, how: str) -> InstalledPlugin | None:
    directory = path if path.is_dir() else path.parent
    try:
        manifest = json.loads((directory / PLUGIN_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("id") != ENGINE_ID:
        return None
    try:
        version = json.loads((directory / "package.json").read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError, AttributeError):
        version = None
    return InstalledPlugin(directory, how, version if isinstance(version, str) else None, manifest)


def _install_record(state: Path) -> dict[str, Any]:
    """The host's install record of the plugin, read from its state database without writing to it."""
    database = state / "state" / "openclaw.sqlite"
    if not database.is_file():
        return {}
    # A WAL database opened read-only still creates its -wal and -shm files when they are missing; without
    # them everything is in the main file, which ``immutable`` reads without creating anything.
    live = Path(f"{database}-wal").exists() or Path(f"{database}-shm").exists()
    try:
        conn = sqlite3.connect(f"{database.as_uri()}?{'mode=ro' if live else 'immutable=1'}", uri=True, timeout=2)
        try:
            row = conn.execute(
                "SELECT value_json FROM config_machine_state WHERE state_key = ?", (INSTALL_INDEX_KEY,)
            ).fetchone()
        finally:
            conn.close()
        index = json.loads(row[0]) if row else {}
    except (sqlite3.Error, ValueError):
        return {}
    return _obj(_obj(_obj(_obj(index).get("index")).get("installRecords")).get(ENGINE_ID))


def source_plugin_dir() -> Path | None:
    """The plugin folder beside this package when it runs from a source checkout (what ``install -l`` takes)."""
    candidate = Path(openclaw_lossless.__file__).resolve().parents[1] / "plugin"
    return candidate if (candidate / PLUGIN_MANIFEST).is_file() else None


def install(host: HostConfig, found: InstalledPlugin | None, broken: list[str]) -> Finding:
    if found is not None:
        return Finding(
            "plugin-install",
            True,
            f"plugin {found.version or '(no version)'} at {found.path} (from {found.how})",
            code="plugin_installed",
            data={"path": str(found.path), "how": found.how, "version": found.version},
        )
    source = source_plugin_dir()
    where = str(source) if source else "<the plugin folder of the openclaw-lossless release>"
    detail = "the lossless plugin is not installed: no plugins.load.paths entry, install record or extension holds it"
    return Finding(
        "plugin-install",
        False,
        "; ".join([detail, *broken]),
        f"openclaw plugins install -l {where} --force --accept-capabilities, {RESTART}",
        code="plugin_not_installed",
    )


def plugin_version(found: InstalledPlugin | None) -> Finding | None:
    if found is None:
        return None
    mine = openclaw_lossless.__version__
    if found.version == mine:
        return Finding("plugin-version", True, f"plugin and sidecar are both {mine}", code="version_ok")
    return Finding(
        "plugin-version",
        False,
        f"the plugin at {found.path} is {found.version or '(no version)'} but this sidecar is {mine}:"
        " the two speak one contract only when they come from the same release",
        f"install both from one release: pip install the openclaw-lossless that matches, or"
        f" openclaw plugins install -l <its plugin folder> --force --accept-capabilities, {RESTART}",
        code="version_mismatch",
        data={"plugin": found.version, "sidecar": mine},
    )


def config_values(host: HostConfig, found: InstalledPlugin | None) -> Finding:
    """The entry's config against the plugin's own schema (what the host validates it with), each error by path."""
    raw = _obj(entry_of(host)).get("config", {})
    schema = found.manifest.get("configSchema") if found is not None else None
    if not isinstance(schema, dict):
        return Finding(
            "plugin-config", True, "not checked: the plugin's schema is not installed", code="config_unchecked"
        )
    validator_class = jsonschema.validators.validator_for(schema)
    errors = sorted(validator_class(schema).iter_errors(raw), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return Finding("plugin-config", True, "plugins.entries.lossless.config is valid", code="config_valid")
    listed = [{"path": ".".join(str(p) for p in e.absolute_path) or "(config)", "message": e.message} for e in errors]
    return Finding(
        "plugin-config",
        False,
        "plugins.entries.lossless.config: "
        + "; ".join(f"{e['path']}: {e['message']}" for e in listed)
        + ". OpenClaw rejects the whole config while one value is invalid: the gateway does not start with it and"
        " `openclaw config set` refuses to change it, so fix this first",
        f"edit {host.location.config_path}: plugins.entries.lossless.config (the allowed values and their"
        f" ranges are in {found.path / PLUGIN_MANIFEST if found else PLUGIN_MANIFEST}), then: openclaw config validate",
        code="config_invalid",
        data={"errors": listed},
    )


def selection(host: HostConfig) -> Finding | None:
    """Which sessions are captured, shown whenever the user narrowed it (a choice, so never a failure)."""
    config = entry_config(host)
    chosen = {key: config[key] for key in ("includeSessions", "excludeSessions") if config.get(key)}
    if not chosen:
        return None
    parts = []
    if "includeSessions" in chosen:
        parts.append(f"only sessions matching {json.dumps(chosen['includeSessions'])} are captured")
    if "excludeSessions" in chosen:
        parts.append(f"sessions matching {json.dumps(chosen['excludeSessions'])} are neither stored nor recalled")
    return Finding("session-selection", True, "; ".join(parts), code="session_selection", data=chosen)
