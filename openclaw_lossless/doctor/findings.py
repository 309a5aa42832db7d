"""One finding of ``doctor``: what was checked, whether it is fine, and the command or edit that fixes it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Finding:
    """``ok`` False fails the run; an ok finding with a ``fix`` is a note (fine, but worth doing).

    ``code`` is a stable machine name for what was found (``slot_not_lossless``), so scripts and tests need
    not parse ``detail``; ``data`` carries the structured facts behind ``detail`` for ``doctor --json``.
    ``skipped`` marks checks that did not run because what they check is absent (no OpenClaw installed).
    """

    check: str
    ok: bool
    detail: str
    fix: str | None = None
    code: str | None = None
    data: dict[str, Any] | None = None
    skipped: bool = False  # ok, but not checked at all (no OpenClaw here): shown as ``skip``

    def view(self) -> dict[str, Any]:
        return asdict(self)
