"""Where each agent's workspace is, found the way OpenClaw finds it, and the memory files in it.

OpenClaw's rules (docs.openclaw.ai, "Agent workspace"): the default workspace is ``agents.defaults.workspace``,
else ``$OPENCLAW_WORKSPACE_DIR``, else ``<state>/workspace``; an agent's entry (``agents.list[]`` or
``agents.entries.<id>``) may set its own ``workspace``; the agent owning the default workspace (the one entry
marked ``default``, else the sole entry, else ``main`` when none is listed; none among several unmarked) uses
it, and any other agent ``<agents.defaults.workspace>/<id>`` when that root is configured, else
``<state>/workspace-<id>`` (OpenClaw 2026.9's ``resolveAgentWorkspaceDir``). Agents the host has transcripts of
(``<state>/agents/<id>``) but no entry for follow the same rule. The config is read as doctor reads it
(``doctor/host_config.py``: JSON5, ``$include``); a config that cannot be read leaves the defaults.

The memory files: ``MEMORY.md`` (or ``memory.md``) at the workspace's root and every ``*.md`` under
``memory/``, never following a link out of the workspace, never a hidden file or folder.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw_lossless.doctor import host_config
from openclaw_lossless.transcripts.sources import AGENT_ID

log = logging.getLogger(__name__)

DEFAULT_AGENT = "main"
ROOT_FILES = ("MEMORY.md", "memory.md")
MEMORY_DIR = "memory"


@dataclass(frozen=True)
class Workspace:
    agent_id: str
    root: Path


def read_config(openclaw_state: Path, config_path: Path | None) -> dict[str, Any]:
    """The host's config (``config_path``, else ``<state>/openclaw.json``), ``{}`` when there is none to read."""
    path = config_path.expanduser() if config_path is not None else host_config._config_in(openclaw_state)
    location = host_config.Location(path, openclaw_state, "settings")
    try:
        return host_config.load(location, {}).data
    except FileNotFoundError:
        return {}
    except (host_config.ConfigError, OSError) as exc:
        log.warning(
            "the OpenClaw config could not be read, workspaces are looked for where they are by default: %s", exc
        )
        return {}


def locate(
    openclaw_state: Path, config: dict[str, Any], workspace_dir: Path | None, known_agents: Iterable[str] = ()
) -> list[Workspace]:
    """Every agent's workspace that exists, the configured agents first, each agent once."""
    agents_section = _dict(config.get("agents"))
    defaults = _dict(agents_section.get("defaults"))
    root = _path(defaults.get("workspace"))
    default_workspace = root or workspace_dir or openclaw_state / "workspace"
    entries = _entries(agents_section)
    default_agent = _owner(agents_section, entries)
    found: dict[str, Path] = {}
    for agent, entry in entries:
        found.setdefault(
            agent,
            _path(entry.get("workspace")) or _derived(agent, default_agent, default_workspace, root, openclaw_state),
        )
    for agent in [*_host_agents(openclaw_state), *known_agents, *([default_agent] if default_agent else [])]:
        if AGENT_ID.match(agent) and agent not in found:
            found[agent] = _derived(agent, default_agent, default_workspace, root, openclaw_state)
    return [Workspace(agent, path) for agent, path in found.items() if path.is_dir()]


def _owner(agents_section: dict[str, Any], entries: list[tuple[str, dict[str, Any]]]) -> str | None:
    """The agent that keeps the default workspace (OpenClaw's legacy data owner): the one entry marked
    ``default: true`` (unless ``agents.ownership`` is ``explicit``), else the sole entry, else ``main`` when
    the config lists no agents at all; with several entries and no marker, none does."""
    marked = [agent for agent, entry in entries if entry.get("default") is True]
    if agents_section.get("ownership") != "explicit" and len(marked) == 1:
        return marked[0]
    if not entries:
        return None if "list" in agents_section or "entries" in agents_section else DEFAULT_AGENT
    return entries[0][0] if len(entries) == 1 else None


def _derived(agent: str, default_agent: str | None, default_workspace: Path, root: Path | None, state: Path) -> Path:
    if agent == default_agent:
        return default_workspace
    return root / agent if root is not None else state / f"workspace-{agent}"


def _entries(agents_section: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """``agents.list`` (objects with an ``id``), then ``agents.entries`` (by id)."""
    entries: list[tuple[str, dict[str, Any]]] = []
    listed = agents_section.get("list")
    for item in listed if isinstance(listed, list) else []:
        if isinstance(item, dict) and isinstance(item.get("id"), str) and AGENT_ID.match(item["id"]):
            entries.append((item["id"], item))
    for agent, item in _dict(agents_section.get("entries")).items():
        if isinstance(item, dict) and AGENT_ID.match(str(agent)):
            entries.append((str(agent), item))
    return entries


def _host_agents(openclaw_state: Path) -> list[str]:
    agents = openclaw_state / "agents"
    return sorted(p.name for p in agents.iterdir() if p.is_dir()) if agents.is_dir() else []


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _path(value: Any) -> Path | None:
    return Path(value.strip()).expanduser() if isinstance(value, str) and value.strip() else None


def memory_paths(root: Path) -> Iterator[tuple[str, Path]]:
    """(path relative to the workspace, file) of each memory file, in a stable order."""
    try:
        base = root.resolve(strict=True)
    except OSError:
        return
    seen: set[Path] = set()
    candidates = [root / name for name in ROOT_FILES]
    folder = root / MEMORY_DIR
    if folder.is_dir():
        candidates += sorted(folder.rglob("*.md"))
    for path in candidates:
        relative = path.relative_to(root)
        if any(part.startswith(".") for part in relative.parts):
            continue
        try:
            real = path.resolve(strict=True)
        except OSError:
            continue
        if real in seen or not real.is_relative_to(base) or not real.is_file():
            continue
        seen.add(real)
        yield relative.as_posix(), path
