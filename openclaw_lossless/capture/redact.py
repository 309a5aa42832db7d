"""Redaction: secrets are replaced by a typed placeholder before text is indexed, embedded or recalled.

Conversations with agents are full of pasted keys and connection strings. Anything matched here never
reaches the FTS index, the vectors, an embedding API or a recalled block; whether the stored original keeps
it is the ``redact_originals`` setting (default: redacted there too).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

_BUILTIN: list[tuple[str, str]] = [
    ("private_key", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|$)"),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_\-]{20,}"),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"),
    ("github_token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,})"),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_\-]{20,}"),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    ("aws_secret_key", r"(?i)aws_?secret_?access_?key\s*[:=]\s*['\"]?[A-Za-z0-9/+]{40}"),
    ("google_api_key", r"\bAIza[0-9A-Za-z_\-]{35}"),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}"),
    ("slack_webhook", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
    ("stripe_key", r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}"),
    ("npm_token", r"\bnpm_[A-Za-z0-9]{36}"),
    ("sendgrid_key", r"\bSG\.[A-Za-z0-9_\-]{16,}\.[A-Za-z0-9_\-]{16,}"),
    ("twilio_key", r"\bSK[0-9a-fA-F]{32}\b"),
    ("discord_token", r"\b[MN][A-Za-z\d]{23,25}\.[\w-]{6}\.[\w-]{27,}"),
    ("telegram_token", r"\b\d{8,10}:AA[A-Za-z0-9_\-]{33}"),
    ("jwt", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    ("bearer_token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/\-]{16,}=*"),
    ("url_password", r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"),
    (
        "secret_assignment",
        r"(?i)(?P<key>(?<![A-Za-z0-9])(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?token"
        r"|auth[_-]?token|client[_-]?secret|private[_-]?key)[\"']?\s*[:=]\s*[\"']?)(?!\[REDACTED)"
        r"(?P<value>[^\s\"',;]{4,})",
    ),
]
_SECRET_FIELD = re.compile(
    r"(?i)^(?:password|passwd|pwd|secret|api[_-]?key|apikey|access[_-]?token|auth[_-]?token|client[_-]?secret"
    r"|private[_-]?key|token|authorization)$"
)


@dataclass(frozen=True)
class Redactor:
    """Compiled patterns; build once per process (see ``build_redactor``)."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...]

    def redact(self, text: str) -> str:
        for kind, pattern in self.patterns:
            replacement = rf"\g<key>[REDACTED:{kind}]" if "key" in pattern.groupindex else f"[REDACTED:{kind}]"
            text = pattern.sub(replacement, text)
        return text

    def redact_optional(self, text: str | None) -> str | None:
        """``redact`` for free text that may be absent (a compaction's summary, a reason)."""
        return None if text is None else self.redact(text)

    def redact_value(self, value: Any) -> Any:
        """Redact every string inside a JSON value, keeping its shape."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, list):
            return [self.redact_value(item) for item in value]
        if isinstance(value, dict):
            return {key: self._redact_field(key, item) for key, item in value.items()}
        return value

    def _redact_field(self, key: Any, item: Any) -> Any:
        """A string under a secret-named key (``{"password": ...}`` in tool arguments) goes whole."""
        if isinstance(item, str) and isinstance(key, str) and _SECRET_FIELD.match(key) and len(item) >= 4:
            return "[REDACTED:secret_field]"
        return self.redact_value(item)


def build_redactor(extra_patterns: Iterable[str] = ()) -> Redactor:
    """The built-in patterns plus the operator's own (each a regular expression, typed ``custom``)."""
    compiled = [(kind, re.compile(source)) for kind, source in _BUILTIN]
    compiled += [("custom", re.compile(source)) for source in extra_patterns]
    return Redactor(tuple(compiled))
