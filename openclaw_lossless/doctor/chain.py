"""The host's side of ``doctor``: from the OpenClaw config the gateway reads to the sidecar it reaches.

The chain stops at the first link that leaves nothing to check (no config, a config that does not parse);
after that each link is reported on its own, so one run names every misconfiguration at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from openclaw_lossless.doctor import plugin
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.host_config import ConfigError, HostConfig, Location, load, locate
from openclaw_lossless.doctor.reach import reach

CHECK = "openclaw-config"
# How locate() says it fell back to the default place rather than being told where OpenClaw lives.
DEFAULT_CHOICE = ("HOME", "OPENCLAW_HOME")


@dataclass
class Chain:
    """What the host checks found, and the state dir the plugin's sidecar uses (None without a config)."""

    findings: list[Finding]
    plugin_state_dir: Path | None
    host: HostConfig | None


def plugin_state_dir(host: HostConfig) -> Path:
    """Where the plugin's sidecar keeps its store and token: the entry's ``stateDir``, else the plugin default."""
    configured = plugin.entry_config(host).get("stateDir")
    if isinstance(configured, str) and configured.strip():
        return Path(configured).expanduser()
    return host.location.state_dir / "plugins" / plugin.ENGINE_ID


def config_finding(
    env: Mapping[str, str], profile: str | None, openclaw_state: Path | None
) -> tuple[Finding, HostConfig | None]:
    location = locate(env, profile, openclaw_state)
    where = {"path": str(location.config_path), "stateDir": str(location.state_dir), "chosenBy": location.chosen_by}
    hint = _profile_hint(env, profile)
    try:
        host = load(location, env)
    except FileNotFoundError:
        if location.chosen_by in DEFAULT_CHOICE:  # nothing points at OpenClaw: the sidecar is used alone (yet)
            return _skipped(location, where), None
        return Finding(
            CHECK,
            False,
            f"no OpenClaw config at {location.config_path} (chosen by {location.chosen_by}): OpenClaw is not"
            f" set up here, or its gateway reads another file, so the plugin's wiring cannot be checked{hint}",
            "point doctor at the gateway's config: OPENCLAW_CONFIG_PATH=<file>, OPENCLAW_STATE_DIR=<dir> or"
            " doctor --profile <name> (as given to openclaw); or set OpenClaw up: openclaw onboard",
            code="config_missing",
            data=where,
        ), None
    except ConfigError as exc:
        code = "config_include_failed" if exc.include else "config_unparsable"
        return Finding(
            CHECK,
            False,
            f"the OpenClaw config cannot be read as the gateway reads it: {exc}; the gateway cannot start with it",
            f"fix {exc.path}" + (f" at line {exc.line}" if exc.line else "") + " (JSON5), then run doctor again",
            code=code,
            data=where | {"error": exc.view()},
        ), None
    except (OSError, UnicodeDecodeError) as exc:
        return Finding(
            CHECK,
            False,
            f"cannot read {location.config_path}: {exc}",
            f"check the file's permissions: ls -l {location.config_path}",
            code="config_unreadable",
            data=where,
        ), None
    includes = [str(path) for path in host.includes]
    detail = f"{location.config_path} (chosen by {location.chosen_by}){hint}"
    detail += f", with {len(includes)} included files" if includes else ""
    return Finding(CHECK, True, detail, code="config_found", data=where | {"includes": includes}), host


def _skipped(location: Location, where: dict[str, str]) -> Finding:
    """No OpenClaw here, and nothing named one: the host checks are skipped, which is no fault of the store."""
    return Finding(
        CHECK,
        True,
        f"skipped the OpenClaw checks (config, slot, plugin, reach, transcripts): no OpenClaw config at"
        f" {location.config_path}; if a gateway here reads another file, name it with OPENCLAW_CONFIG_PATH,"
        " OPENCLAW_STATE_DIR or --profile",
        code="host_checks_skipped",
        data=where,
        skipped=True,
    )


def _profile_hint(env: Mapping[str, str], profile: str | None) -> str:
    """OPENCLAW_PROFILE alone moves nothing in OpenClaw; say so, since a user may expect it to."""
    named = env.get("OPENCLAW_PROFILE", "").strip()
    if profile or not named or named.lower() == "default" or env.get("OPENCLAW_STATE_DIR", "").strip():
        return ""
    return (
        f"; OPENCLAW_PROFILE={named} is set, but only `openclaw --profile {named}` uses that profile's files:"
        f" add --profile {named} to check them"
    )


def run_chain(env: Mapping[str, str], profile: str | None, openclaw_state: Path | None) -> Chain:
    first, host = config_finding(env, profile, openclaw_state)
    if host is None:
        return Chain([first], None, None)
    found, broken = plugin.find_install(host)
    values = plugin.config_values(host, found)
    # An invalid value makes OpenClaw refuse the whole config (and every `openclaw config set`): fixed first.
    findings = [first, *([values] if not values.ok else [])]
    findings += [plugin.slot(host), plugin.entry(host), plugin.install(host, found, broken)]
    findings += [f for f in (plugin.plugin_version(found), values if values.ok else None) if f is not None]
    selection = plugin.selection(host)
    findings += [selection] if selection is not None else []
    state_dir = plugin_state_dir(host)
    findings.append(reach(plugin.entry_config(host), state_dir, host.location.state_dir, host.location.config_path))
    return Chain(findings, state_dir, host)
