"""The OpenClaw config the gateway reads: where it is, and its content with ``$include`` resolved.

The rules follow OpenClaw 2026.9's own (``src/config/paths.ts``, ``src/cli/profile.ts``,
``src/config/includes.ts``), so doctor reads the file the gateway reads:

- ``$OPENCLAW_CONFIG_PATH``, else ``<state>/openclaw.json`` (or a legacy ``clawdbot.json`` found there);
- state = ``$OPENCLAW_STATE_DIR``, else ``<home>/.openclaw`` (``<home>/.openclaw-<profile>`` for
  ``openclaw --profile <profile>``, which is what ``doctor --profile`` mirrors), with home =
  ``$OPENCLAW_HOME``, else ``$HOME``. ``OPENCLAW_PROFILE`` alone in the environment moves nothing: OpenClaw
  takes a profile only from ``--profile``, which then sets the two variables above for its process;
- the file is JSON5; ``$include`` (a path or a list of paths, relative to the including file, inside the
  config's directory or ``$OPENCLAW_INCLUDE_ROOTS``) replaces the object it sits in, lists deep-merge in
  order, sibling keys override, ten levels at most.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import json5

CONFIG_NAME = "openclaw.json"
LEGACY_CONFIG_NAMES = ("clawdbot.json",)
LEGACY_STATE_NAMES = (".clawdbot",)
INCLUDE_KEY = "$include"
MAX_INCLUDE_DEPTH = 10
MAX_INCLUDE_BYTES = 2 * 1024 * 1024
PROFILE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$", re.IGNORECASE)
_PARSER_MESSAGE = re.compile(r"^<string>:(\d+) (.*?)(?: at column (\d+))?$", re.DOTALL)


@dataclass(frozen=True)
class Location:
    """The config file and state directory the gateway uses, and which setting chose them."""

    config_path: Path
    state_dir: Path
    chosen_by: str
    profile: str | None = None


@dataclass
class HostConfig:
    location: Location
    data: dict[str, Any]
    includes: list[Path] = field(default_factory=list)


class ConfigError(Exception):
    """The config (or one of its includes) cannot be read: which file, where in it, and the reason."""

    def __init__(
        self, path: Path, message: str, line: int | None = None, column: int | None = None, *, include: bool = False
    ) -> None:
        where = f" line {line}" if line is not None else ""
        where += f", column {column}" if column is not None else ""
        super().__init__(f"{path}{where}: {message}")
        self.path, self.message, self.line, self.column = path, message, line, column
        self.include = include  # an $include that cannot be followed, rather than text that does not parse

    def view(self) -> dict[str, Any]:
        return {"path": str(self.path), "line": self.line, "column": self.column, "message": self.message}


def _set(value: str | None) -> str | None:
    """The value, trimmed; None when blank or the literal ``undefined``/``null`` (which OpenClaw treats as unset)."""
    value = (value or "").strip()
    return None if value in ("", "undefined", "null") else value


def home_dir(env: Mapping[str, str]) -> Path:
    """OpenClaw's home: ``$OPENCLAW_HOME`` (``~`` expanded against the OS home), else ``$HOME``."""
    os_home = _set(env.get("HOME")) or str(Path.home())
    explicit = _set(env.get("OPENCLAW_HOME"))
    if explicit is None:
        return Path(os_home).resolve()
    if explicit == "~" or explicit.startswith("~/"):
        explicit = os_home + explicit[1:]
    return Path(explicit).resolve()


def _user_path(value: str, env: Mapping[str, str]) -> Path:
    value = value.strip()
    if value == "~" or value.startswith("~/"):
        value = str(home_dir(env)) + value[1:]
    return Path(value).resolve()


def locate(env: Mapping[str, str], profile: str | None = None, state_dir: Path | None = None) -> Location:
    """The gateway's config path and state dir; ``profile`` is ``openclaw --profile``, ``state_dir`` an override.

    An explicit ``$OPENCLAW_STATE_DIR``/``$OPENCLAW_CONFIG_PATH`` wins over a profile, as in OpenClaw.
    """
    env = dict(env)
    if state_dir is not None:
        env["OPENCLAW_STATE_DIR"] = str(state_dir)
    profile = None if profile is None or profile.strip().lower() == "default" else profile.strip()
    state_override = env.get("OPENCLAW_STATE_DIR", "").strip()
    if state_override:
        state, chosen_by = _user_path(state_override, env), "OPENCLAW_STATE_DIR"
    elif profile:
        state, chosen_by = home_dir(env) / f".openclaw-{profile}", f"--profile {profile}"
    else:
        state, chosen_by = _default_state_dir(env), "OPENCLAW_HOME" if _set(env.get("OPENCLAW_HOME")) else "HOME"
    config_override = env.get("OPENCLAW_CONFIG_PATH", "").strip()
    if config_override:
        return Location(_user_path(config_override, env), state, "OPENCLAW_CONFIG_PATH", profile)
    return Location(_config_in(state), state, chosen_by, profile)


def _default_state_dir(env: Mapping[str, str]) -> Path:
    home = home_dir(env)
    new = home / ".openclaw"
    if new.exists():
        return new
    legacy = [home / name for name in LEGACY_STATE_NAMES if (home / name).exists()]
    return legacy[0] if legacy else new


def _config_in(state: Path) -> Path:
    for name in (CONFIG_NAME, *LEGACY_CONFIG_NAMES):
        if (state / name).exists():
            return state / name
    return state / CONFIG_NAME


def include_roots(env: Mapping[str, str]) -> list[Path]:
    raw = env.get("OPENCLAW_INCLUDE_ROOTS", "").strip()
    return [_user_path(entry, env) for entry in raw.split(os.pathsep) if entry.strip()]


def parse_json5(path: Path, text: str) -> Any:
    """The file parsed as JSON5, or a ``ConfigError`` with the parser's line, column and message."""
    try:
        return json5.loads(text)
    except ValueError as exc:
        match = _PARSER_MESSAGE.match(str(exc))
        if match is None:
            raise ConfigError(path, str(exc)) from None
        column = int(match.group(3)) if match.group(3) else None
        raise ConfigError(path, match.group(2), int(match.group(1)), column) from None


def load(location: Location, env: Mapping[str, str]) -> HostConfig:
    """Read and parse the config with its includes resolved; ``FileNotFoundError`` when there is none."""
    path = location.config_path
    text = path.read_text(encoding="utf-8")
    data = parse_json5(path, text)
    if not isinstance(data, dict):
        raise ConfigError(path, f"the config must be an object, not {type(data).__name__}")
    roots = [path.parent.resolve(), *include_roots(env)]
    includes: list[Path] = []
    resolved = _Includes(roots, includes).process(data, path, 0, (path.resolve(),))
    return HostConfig(location, resolved, includes)


class _Includes:
    def __init__(self, roots: list[Path], seen: list[Path]) -> None:
        self.roots, self.seen = roots, seen

    def process(self, value: Any, base: Path, depth: int, chain: tuple[Path, ...]) -> Any:
        if isinstance(value, list):
            return [self.process(item, base, depth, chain) for item in value]
        if not isinstance(value, dict):
            return value
        if INCLUDE_KEY not in value:
            return {key: self.process(item, base, depth, chain) for key, item in value.items()}
        included = self._resolve(value[INCLUDE_KEY], base, depth, chain)
        siblings = {key: self.process(item, base, depth, chain) for key, item in value.items() if key != INCLUDE_KEY}
        if not siblings:
            return included
        if not isinstance(included, dict):
            raise ConfigError(base, f"{INCLUDE_KEY} with sibling keys must include an object", include=True)
        return deep_merge(included, siblings)

    def _resolve(self, target: Any, base: Path, depth: int, chain: tuple[Path, ...]) -> Any:
        if isinstance(target, str):
            return self._load(target, base, depth, chain)
        if isinstance(target, list) and all(isinstance(item, str) for item in target):
            merged: Any = {}
            for item in target:
                merged = deep_merge(merged, self._load(item, base, depth, chain))
            return merged
        raise ConfigError(base, f"{INCLUDE_KEY} must be a path or a list of paths", include=True)

    def _load(self, target: str, base: Path, depth: int, chain: tuple[Path, ...]) -> Any:
        if depth >= MAX_INCLUDE_DEPTH:
            raise ConfigError(
                base, f"{INCLUDE_KEY} nested deeper than {MAX_INCLUDE_DEPTH} levels at {target}", include=True
            )
        path = (base.parent / target).resolve()
        if not any(path.is_relative_to(root) for root in self.roots):
            raise ConfigError(base, f"{INCLUDE_KEY} {target} is outside the config directory", include=True)
        if path in chain:
            raise ConfigError(
                base, f"circular {INCLUDE_KEY}: {' -> '.join(str(p) for p in (*chain, path))}", include=True
            )
        try:
            if path.stat().st_size > MAX_INCLUDE_BYTES:
                raise ConfigError(path, f"included file is larger than {MAX_INCLUDE_BYTES} bytes", include=True)
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                base, f"{INCLUDE_KEY} {target} cannot be read ({exc.strerror or exc})", include=True
            ) from None
        self.seen.append(path)
        return self.process(parse_json5(path, text), path, depth + 1, (*chain, path))


def deep_merge(target: Any, source: Any) -> Any:
    """OpenClaw's include merge: objects merge recursively, arrays concatenate, anything else: source wins."""
    if isinstance(target, dict) and isinstance(source, dict):
        out = dict(target)
        for key, value in source.items():
            out[key] = deep_merge(out[key], value) if key in out else value
        return out
    if isinstance(target, list) and isinstance(source, list):
        return [*target, *source]
    return source
