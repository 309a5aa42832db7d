"""The identities of the messages an archive file holds, read the same way wherever they are rebuilt.

Why: the migration that keeps archived messages' identities (SQLite m012, PostgreSQL m010) and salvage read
the gzip archives; one reader serves them all, so they cannot disagree on which lines count
(docs/decisions/0101-archived-identities.md).
"""

from __future__ import annotations

import gzip
import json
import logging
import zlib
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)


def identities(path: Path, reader: str) -> Iterator[tuple[bytes, int, str]]:
    """(content hash, id, session id) of each message line of the archive at ``path`` that can be read; a
    memory-file chunk or a damaged line is skipped, an unreadable file is logged under ``reader``."""
    try:
        with gzip.open(path, "rb") as handle:
            for raw in handle:
                try:
                    record = json.loads(raw)
                    if "type" not in record and record.get("kind") != "memory":
                        yield bytes.fromhex(str(record["contentHash"])), int(record["id"]), str(record["sessionId"])
                except (ValueError, KeyError, TypeError, AttributeError):
                    continue
    except (OSError, EOFError, zlib.error) as exc:
        log.warning("archived identities (%s): %s not read: %s", reader, path, exc)
