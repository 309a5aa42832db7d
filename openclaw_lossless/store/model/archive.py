"""Archiving to stay under ``maxDbSizeMb``: the plan, its outcome, and the JSONL archive file both backends write."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openclaw_lossless.store.model.forgetting import write_gzip

MAX_ROUNDS = 4
HEADROOM = 0.9  # prune down to 90% of the limit, so we do not prune again on the next commit


@dataclass(frozen=True)
class PrunePlan:
    used_bytes: int
    limit_bytes: int
    message_count: int
    last_message_id: int | None


@dataclass(frozen=True)
class Pruned:
    """What an archiving did: the messages it removed, the archive files it wrote, the newest id they hold."""

    pruned: int
    archives: list[str]
    last_message_id: int | None
    skipped: str | None = None  # why nothing was archived this round (PostgreSQL: another sidecar was at it)


@dataclass(frozen=True)
class WouldPrune:
    """What an archiving would do (a dry run): the messages it would archive, the bytes the store uses now."""

    pruned: int
    used_bytes: int


def plan_with(
    limit_mb: float, used: Callable[[], int], total: Callable[[], int], nth: Callable[[int], Sequence[Any] | None]
) -> PrunePlan | None:
    """The prune's arithmetic, asking the store only what it needs: ``used`` (its measure of bytes in use),
    ``total`` (its messages) and ``nth`` (the row of the n-th oldest message's id). Both backends plan by it,
    so they archive the same share of a store over its limit, each by its own measure of what is used."""
    if limit_mb <= 0:
        return None
    limit, in_use = int(limit_mb * 1024 * 1024), used()
    if in_use <= limit:
        return None
    messages = total()
    if messages == 0:
        return None
    count = min(messages, max(1, int((in_use - limit * HEADROOM) / (in_use / messages)) + 1))
    row = nth(count)
    return PrunePlan(in_use, limit, count, None if row is None else int(row[0]))


def first_look(todo: PrunePlan | None, *, dry_run: bool) -> Pruned | WouldPrune | None:
    """What a prune answers before archiving anything (nothing to do, or a dry run's count), or None to go on;
    one answer for both backends."""
    if todo is None or todo.last_message_id is None:
        return Pruned(0, [], None)
    if dry_run:
        return WouldPrune(todo.message_count, todo.used_bytes)
    return None


def write_archive(
    archive_dir: Path, last_id: int, records: Iterable[dict[str, Any]], progress: Callable[[int], object] | None
) -> tuple[Path, list[int]]:
    """Write the records (message export lines) to a new archive in ``archive_dir`` (0700), named by the time
    and ``last_id``, 0600, fsynced and renamed into place (``forget.write_gzip``); returns its path and the ids
    written. ``progress`` is told of each line. Both backends write their archives here, so the files' names,
    lines and durability are one definition; an archive not finished is no archive: nothing is removed for it.
    """
    archive_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(archive_dir, 0o700)
    path = archive_dir / f"messages-{time.strftime('%Y%m%dT%H%M%S')}-{last_id}.jsonl.gz"
    written: list[int] = []

    def lines() -> Iterator[bytes]:
        for record in records:
            yield json.dumps(record, ensure_ascii=False).encode() + b"\n"
            written.append(int(record["id"]))  # runs once the line is written (the writer asks for the next)
            if progress is not None:
                progress(1)

    write_gzip(path, lines(), path.with_suffix(".partial"))
    return path, written
