"""A memory-file chunk as the store keeps a message: redacted like one, identified by its file, lines and text.

Shared by the indexer and by import (``store/model/transfer/lines.py``), so a chunk read back from an export
has the identity the indexer gives it and the next pass finds it already stored. Imports nothing of the store.
"""

from __future__ import annotations

import hashlib
import re

from openclaw_lossless.capture import importance, token_estimate
from openclaw_lossless.capture.records import CaptureOptions, MessageRecord, canonical_json, storable

ROLE = "memory"
CITATION = re.compile(r"^file:(?P<path>[^#\x00-\x1f]{1,4096})#L(?P<first>[1-9][0-9]{0,8})-(?P<last>[1-9][0-9]{0,8})$")


def citation_of(path: str, first_line: int, last_line: int) -> str:
    return f"file:{path}#L{first_line}-{last_line}"


def chunk_record(
    path: str, first_line: int, last_line: int, text: str, mtime: float, options: CaptureOptions
) -> MessageRecord:
    """The chunk's record; its text redacted by ``options.redactor`` (again, for an imported one: idempotent)."""
    redacted = storable(options.redactor.redact(text))
    original = canonical_json({"role": ROLE, "file": path, "lines": [first_line, last_line], "content": redacted})
    grade = importance.grade(ROLE, redacted)
    return MessageRecord(
        role=ROLE,
        created_at=mtime,
        text=redacted,
        original=original,
        content_hash=hashlib.sha256(original.encode("utf-8", "surrogatepass")).digest(),
        window_key=citation_of(path, first_line, last_line),
        tokens=token_estimate.estimate_tokens(redacted),
        importance=grade.score,
        importance_label=grade.label,
        dated=True,
    )
