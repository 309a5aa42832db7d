"""Which sessions are captured: ``LOSSLESS_INCLUDE_SESSIONS`` and ``LOSSLESS_EXCLUDE_SESSIONS``.

A user keeps cron jobs or a noisy group chat out of memory by naming their session keys with glob patterns.
The rule, which the plugin implements identically in JavaScript: patterns are matched case-sensitively
against the session key (``agent:<agentId>:<name>``), or the session id for a session without a key, with
``fnmatch.fnmatchcase`` semantics (``*`` any run of characters, ':' included; ``?`` one character; ``[...]``
a character class). A session is captured iff (no include pattern is set, or one matches) and no exclude
pattern matches. An excluded session is neither stored nor given recall, and neither catch-up nor
``import`` reads it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase


def parse_patterns(value: str | Iterable[str] | None) -> list[str]:
    """A comma-separated string (the environment's form) or a list, as a list of non-empty patterns."""
    if value is None:
        return []
    parts = value.split(",") if isinstance(value, str) else list(value)
    return [part.strip() for part in parts if isinstance(part, str) and part.strip()]


@dataclass(frozen=True)
class SessionSelection:
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    @staticmethod
    def of(include: Iterable[str], exclude: Iterable[str]) -> SessionSelection:
        return SessionSelection(tuple(parse_patterns(include)), tuple(parse_patterns(exclude)))

    @property
    def everything(self) -> bool:
        """True when no pattern is set: every session is captured (the hot path then does no matching)."""
        return not self.include and not self.exclude

    def captures(self, session_id: str, session_key: str | None) -> bool:
        """Whether this session is stored and recalled: the session key is matched, or the id without one."""
        if self.everything:
            return True
        name = session_key or session_id  # as the plugin does: an empty key is no key
        if self.include and not any(fnmatchcase(name, pattern) for pattern in self.include):
            return False
        return not any(fnmatchcase(name, pattern) for pattern in self.exclude)
