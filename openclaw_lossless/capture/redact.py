"""Redaction: secrets are replaced by a typed placeholder before text is indexed, embedded or recalled.

Conversations with agents are full of pasted keys and connection strings. Anything matched here never
reaches the FTS index, the vectors, an embedding API or a recalled block; whether the stored original keeps
it is the ``redact_originals`` setting (default: redacted there too).

The rules live in one data file, ``secret_rules.toml`` beside this module: providers' documented token
shapes first, then generic rules (secret-named assignments in every syntax, ``Authorization`` headers of any
scheme, URL user-info, command-line password flags, passwords and keys given in a sentence). Each rule may
name keywords; a rule runs only on text holding one of them, so an ordinary message costs one lower-casing
and a few substring tests. All rules' matches are collected first and replaced in one pass: overlapping
matches become one placeholder named by the earliest rule, so no placeholder is ever nested or half-applied.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from openclaw_lossless.capture.redact_checks import CHECKS, Check, entropy, is_reference, name_class, token_like

RULES_FILE = "secret_rules.toml"
_TRIGRAM_LIMIT = 4_000_000
# An unbroken run of base64 this long is an image or a file (a data URI, an attachment), not a credential:
# it is left as it is and not scanned, which keeps a pasted screenshot from costing seconds. JWTs and key
# blocks are far shorter per unbroken run (a PEM body breaks every 64 characters).
_BLOB = 8192
_BLOB_RUN = re.compile(rf"[A-Za-z0-9+/=_\-]{{{_BLOB},}}")
_PLACEHOLDER = re.compile(r"\[REDACTED:[A-Za-z0-9_]+\]")
_SECRET_FIELD = re.compile(r"(?i)^(?:authorization|proxy-authorization|cookie|set-cookie)$")


@dataclass(frozen=True)
class Rule:
    """One line of the rules file, compiled."""

    kind: str
    pattern: re.Pattern[str]
    keywords: tuple[str, ...] = ()
    min_entropy: float | None = None
    check: Check | None = None

    def spans(self, text: str) -> Iterable[tuple[int, int]]:
        """The parts of ``text`` this rule replaces: its ``secret`` group, or the text after a ``key``
        group (the older custom-pattern convention), or the whole match."""
        groups = self.pattern.groupindex
        for match in self.pattern.finditer(text):
            if self.check is not None:
                span = self.check(match)
            elif "secret" in groups:
                span = match.span("secret")
            elif "key" in groups:
                span = (match.end("key"), match.end())
            else:
                span = match.span()
            if span is None or span[0] >= span[1]:
                continue
            if self.min_entropy is not None and entropy(text[span[0] : span[1]]) < self.min_entropy:
                continue
            yield span


@cache
def builtin_rules() -> tuple[Rule, ...]:
    """The rules file, parsed and compiled once per process."""
    data = tomllib.loads(resources.files(__package__).joinpath(RULES_FILE).read_text(encoding="utf-8"))
    return tuple(_rule(entry) for entry in data["rule"])


def _rule(entry: dict[str, Any]) -> Rule:
    check = entry.get("check")
    if check is not None and check not in CHECKS:
        raise ValueError(f"{RULES_FILE}: rule {entry['kind']!r} names an unknown check {check!r}")
    return Rule(
        kind=entry["kind"],
        pattern=re.compile(entry["pattern"]),
        keywords=tuple(keyword.lower() for keyword in entry.get("keywords", ())),
        min_entropy=entry.get("entropy"),
        check=CHECKS[check] if check is not None else None,
    )


@dataclass(frozen=True)
class Redactor:
    """Compiled rules; build once per process (see ``build_redactor``). Earlier rules name overlaps."""

    rules: tuple[Rule, ...]
    # Keywords by their first three characters: a message is tested only for the keywords whose first three
    # characters it contains (one set intersection), not for all four hundred; two-character keywords are
    # few and tested directly.
    _by_trigram: dict[tuple[str, ...], tuple[tuple[str, tuple[int, ...]], ...]] = field(
        init=False, repr=False, compare=False
    )
    _short: tuple[tuple[str, tuple[int, ...]], ...] = field(init=False, repr=False, compare=False)
    _keywords: tuple[tuple[str, tuple[int, ...]], ...] = field(init=False, repr=False, compare=False)
    _always: tuple[int, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_keyword: dict[str, list[int]] = {}
        always: list[int] = []
        for index, rule in enumerate(self.rules):
            for keyword in rule.keywords:
                by_keyword.setdefault(keyword, []).append(index)
            if not rule.keywords or any(len(keyword) < 2 for keyword in rule.keywords):
                always.append(index)
        by_trigram: dict[tuple[str, ...], list[tuple[str, tuple[int, ...]]]] = {}
        short: list[tuple[str, tuple[int, ...]]] = []
        for keyword, indices in by_keyword.items():
            if len(keyword) >= 3:
                by_trigram.setdefault(tuple(keyword[:3]), []).append((keyword, tuple(indices)))
            elif len(keyword) == 2:
                short.append((keyword, tuple(indices)))
        object.__setattr__(self, "_by_trigram", {key: tuple(entries) for key, entries in by_trigram.items()})
        object.__setattr__(self, "_short", tuple(short))
        object.__setattr__(self, "_keywords", tuple((k, tuple(v)) for k, v in by_keyword.items()))
        object.__setattr__(self, "_always", tuple(always))

    def redact(self, text: str) -> str:
        if not text:
            return text
        found = self._matches(text)
        if not found:
            return text
        parts: list[str] = []
        position = 0
        for start, end, index in _merged(found):
            parts += [text[position:start], f"[REDACTED:{self.rules[index].kind}]"]
            position = end
        parts.append(text[position:])
        return "".join(parts)

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
        """A string under a secret-named key (``{"password": ...}``, ``{"apiKey": ...}`` in tool arguments or
        a headers object) goes whole; under a key that only may name a secret, when it looks generated."""
        if isinstance(item, str) and isinstance(key, str) and item.strip() and not is_reference(item.strip()):
            kind = "strong" if _SECRET_FIELD.match(key) else name_class(key)
            if kind in ("password", "strong") or (kind == "weak" and token_like(item)):
                return "[REDACTED:secret_field]"
        return self.redact_value(item)

    def _matches(self, text: str) -> list[tuple[int, int, int]]:
        if len(text) > _BLOB and _BLOB_RUN.search(text):
            text = _BLOB_RUN.sub(lambda blob: " " * len(blob.group()), text)  # same length: spans still fit
        lower = text.lower()
        active = set(self._always)
        for _keyword, indices in self._present_keywords(lower):
            active.update(indices)
        found = [(start, end, index) for index in active for start, end in self.rules[index].spans(text)]
        if found and "[redacted:" in lower:
            kept = [m.span() for m in _PLACEHOLDER.finditer(text)]
            found = [f for f in found if not any(f[0] < end and start < f[1] for start, end in kept)]
        return found

    def _present_keywords(self, lower: str) -> Iterable[tuple[str, tuple[int, ...]]]:
        """The keywords the text holds: a set of its three-letter sequences rules out most of them at once
        (for texts of many megabytes, building that set costs more than searching for each keyword)."""
        if len(lower) > _TRIGRAM_LIMIT:
            return [(keyword, indices) for keyword, indices in self._keywords if keyword in lower]
        trigrams = set(zip(lower, lower[1:], lower[2:], strict=False))
        found = [
            (keyword, indices)
            for trigram in trigrams.intersection(self._by_trigram)
            for keyword, indices in self._by_trigram[trigram]
            if keyword in lower
        ]
        return found + [(keyword, indices) for keyword, indices in self._short if keyword in lower]


def _merged(found: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """Overlapping matches as one span each, named by the earliest rule among them."""
    merged: list[tuple[int, int, int]] = []
    for start, end, index in sorted(found):
        if merged and start < merged[-1][1]:
            last_start, last_end, last_index = merged[-1]
            merged[-1] = (last_start, max(last_end, end), min(last_index, index))
        else:
            merged.append((start, end, index))
    return merged


def build_redactor(extra_patterns: Iterable[str] = ()) -> Redactor:
    """The operator's own patterns (each a regular expression, typed ``custom``, first so they name what they
    match) and then the built-in rules of ``secret_rules.toml``."""
    custom = tuple(Rule("custom", re.compile(source)) for source in extra_patterns)
    return Redactor(custom + builtin_rules())
