"""``doctor``: read-only checks of an installation, each finding with the command that fixes it.

Three parts: the sidecar's own store (``store``); the chain that connects OpenClaw to it (``chain``: the
config the gateway reads, the context-engine slot, the plugin's entry, install, version and config values, and
whether its ``sidecarUrl`` reaches this sidecar); and the turns the host's transcripts hold that the store
lacks (``missed_turns``). Nothing is written and nothing started, so doctor can be pointed at a damaged database or a
broken config and say what is wrong instead of making it worse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from openclaw_lossless.config import Settings, openclaw_state_dir
from openclaw_lossless.doctor.chain import run_chain
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.missed_turns import gaps
from openclaw_lossless.doctor.plugin import entry_config
from openclaw_lossless.doctor.store import store_findings

__all__ = ["Finding", "run"]


def run(
    settings: Settings,
    *,
    env: Mapping[str, str] | None = None,
    profile: str | None = None,
    openclaw_state: Path | None = None,
) -> list[Finding]:
    """Every finding: the store first, then the host chain.

    When the state dir was not chosen (no ``--state-dir``, no ``LOSSLESS_STATE_DIR``), the store checked is
    the one the plugin's sidecar uses (its ``stateDir``, or the profile's default), not a guess.
    """
    chain = run_chain(os.environ if env is None else env, profile, openclaw_state)
    if chain.plugin_state_dir is not None and "state_dir" not in settings.model_fields_set:
        settings = settings.model_copy(update={"state_dir": chain.plugin_state_dir})
    findings = store_findings(settings)
    if chain.plugin_state_dir is not None and chain.plugin_state_dir.resolve() != settings.state_dir.resolve():
        findings.append(
            Finding(
                "state-dir",
                True,
                f"the store checked is {settings.state_dir}, but the plugin's sidecar uses {chain.plugin_state_dir}",
                f"to check the plugin's: openclaw-lossless doctor --state-dir {chain.plugin_state_dir}",
                code="state_dir_differs",
            )
        )
    findings += chain.findings
    if chain.host is not None:
        flags = _import_flags(settings, chain.host.location.state_dir, env)
        findings.append(gaps(settings, chain.host.location.state_dir, entry_config(chain.host), flags))
    return findings


def _import_flags(settings: Settings, openclaw_state: Path, env: Mapping[str, str] | None) -> str:
    """What ``import`` needs to be told to read these transcripts into this store, beyond its defaults."""
    default_state = openclaw_state_dir(dict(os.environ if env is None else env))
    flags = ""
    if openclaw_state.resolve() != default_state.resolve():
        flags += f" --openclaw-state {openclaw_state}"
    if settings.state_dir.resolve() != (default_state / "plugins" / "lossless").resolve():
        flags += f" --state-dir {settings.state_dir}"
    return flags
