"""Re-redaction of what is already stored: ``openclaw-lossless redact --rescan``.

Messages stored before the current rules existed may hold a secret those rules now catch. The rescan applies
the current redactor (redaction is idempotent: a placeholder is never redacted again) to every place that keeps
text: message text and originals (originals only when ``redact_originals`` is on), the full-text index, the
vectors, compaction summaries and reasons, subagent outcomes and end reasons, snapshot names and the gzip
archives in ``<state>/archive``.

Each page of rows is one write transaction, so a running sidecar's commits interleave with the rescan, and the
page's last id is kept in ``meta`` (``CURSOR_KEY``) in that same transaction: an interrupted run continues
where it stopped, with the tally it had. A changed message's FTS row is deleted with its old values (the
index has external content: FTS5 must be told exactly what it held) and inserted with the new ones; its vector
and cached embedding go, and it is queued on the embedding backlog to be embedded again from the redacted
text. Deletes run with ``secure_delete`` on, the FTS index is merged and the WAL checkpointed at the end, so
the old text is gone from the database file, not only hidden.

Identity: a message's content hash is the hash of its redacted original, which is what the current rules
compute for the same host message. When the rescan changes an original that was identified by its content,
the content hash becomes the hash of the new original, so a commit or import of that message under the
current rules is recognised as the one stored. The window key (computed before redaction) is kept, and the
catch-up matches by it anyway. A message identified by its turn (no timestamp), an outcome, or one whose new
hash another message of its session already has keeps its identity as it was.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openclaw_lossless.capture.records import CaptureOptions, canonical_json, storable
from openclaw_lossless.errors import LosslessError
from openclaw_lossless.store.backend import Backend, Store

if TYPE_CHECKING:
    from openclaw_lossless.sidecar import Sidecar

CURSOR_KEY = "redact_rescan"
PAGE = 200
PHASES = ("messages", "compactions", "subagents", "snapshots", "archives")
_PLACEHOLDER = re.compile(r"\[REDACTED:([A-Za-z0-9_]+)\]")

Progress = Callable[[str, int], object]
Requeued = Callable[[list[int]], object]


_RUNNING = threading.Lock()


class RescanRunning(LosslessError):
    status = 409
    code = "rescan_running"


def rescan_store(sidecar: Sidecar, *, dry_run: bool, progress: Progress | None = None, page: int = PAGE) -> Report:
    """Rescan the sidecar's store; the vectors of changed messages leave its in-memory index at once and its
    worker (if any) is woken to embed them again. One rescan at a time per process."""
    index, worker = sidecar.index, sidecar.worker

    def requeued(ids: list[int]) -> None:
        if index is not None:
            index.forget_ids(ids)
        if worker is not None:
            worker.notify()

    if not _RUNNING.acquire(blocking=False):
        raise RescanRunning("a redaction rescan is already running on this store; wait for it to finish")
    try:
        settings = sidecar.settings
        return Rescan(
            sidecar.store,
            sidecar.capture_options,
            settings.archive_dir,
            dry_run=dry_run,
            page=page,
            progress=progress,
            requeued=requeued,
        ).run()
    finally:
        _RUNNING.release()


@dataclass(frozen=True)
class Report:
    """What a rescan changed (or, on a dry run, would change): placeholders by kind, items by place."""

    dry_run: bool
    resumed: bool  # an interrupted rescan was continued
    kinds: dict[str, int]
    places: dict[str, int]
    requeued: int  # messages whose vectors are made again
    identities: int
    changed: int


@dataclass
class Tally:
    """What the rescan changed: placeholders added by kind, items changed by place."""

    kinds: Counter[str] = field(default_factory=Counter)
    places: Counter[str] = field(default_factory=Counter)
    requeued: int = 0
    identities: int = 0

    def note(self, place: str | None, before: str | None, after: str | None) -> bool:
        """Count one item of ``place`` (None: the kinds only) if redaction changed it; whether it did."""
        if before == after:
            return False
        if place is not None:
            self.places[place] += 1
        self.kinds.update(Counter(_PLACEHOLDER.findall(after or "")) - Counter(_PLACEHOLDER.findall(before or "")))
        return True

    def state(self) -> dict[str, Any]:
        return {
            "kinds": dict(self.kinds),
            "places": dict(self.places),
            "requeued": self.requeued,
            "identities": self.identities,
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> Tally:
        return cls(
            Counter(data.get("kinds", {})), Counter(data.get("places", {})), data["requeued"], data["identities"]
        )


@dataclass
class Cursor:
    """Where a run is: the phase and the last id (or archive file name) done in it, and the tally so far."""

    phase: str = PHASES[0]
    after: Any = 0
    tally: Tally = field(default_factory=Tally)
    resumed: bool = False

    def save(self, ops: Backend, conn: Any) -> None:
        value = json.dumps({"phase": self.phase, "after": self.after, "tally": self.tally.state()})
        ops.meta.put(conn, CURSOR_KEY, value)


def load_cursor(ops: Backend, conn: Any) -> Cursor:
    """The interrupted run's cursor, or a fresh one."""
    value = ops.meta.get(conn, CURSOR_KEY)
    if value is None:
        return Cursor()
    data = json.loads(value)
    return Cursor(data["phase"], data["after"], Tally.from_state(data["tally"]), resumed=True)


@dataclass
class Rescan:
    """One run over the store; ``dry_run`` reads only (no cursor, no writes) and reports what would change."""

    store: Store
    options: CaptureOptions
    archive_dir: Path
    dry_run: bool = False
    page: int = PAGE
    progress: Progress | None = None
    requeued: Requeued | None = None
    _pending: list[int] = field(default_factory=list, init=False)

    @property
    def db(self) -> Any:
        return self.store.db

    @property
    def ops(self) -> Backend:
        return self.store.ops

    def run(self) -> Report:
        cursor = Cursor() if self.dry_run else load_cursor(self.ops, self.db.reader())
        previous = self._secure_delete(True)
        try:
            for phase in PHASES[PHASES.index(cursor.phase) :]:
                if phase != cursor.phase:
                    cursor.phase, cursor.after = phase, 0 if phase != "archives" else ""
                self._phase(cursor)
            if not self.dry_run:
                self._finish(cursor)
        finally:
            self._secure_delete(previous)
        tally, places = cursor.tally, dict(cursor.tally.places)
        changed = sum(places.values())
        return Report(
            self.dry_run, cursor.resumed, dict(tally.kinds), places, tally.requeued, tally.identities, changed
        )

    def _phase(self, cursor: Cursor) -> None:
        if cursor.phase == "archives":
            self._archives(cursor)
            return
        page = {
            "messages": self._messages,
            "compactions": self._compactions,
            "subagents": self._subagents,
            "snapshots": self._snapshots,
        }[cursor.phase]
        while True:
            done = (
                self._read(page, cursor)
                if self.dry_run
                else self.db.write(lambda conn: self._write(page, cursor, conn))
            )
            if self.progress is not None and done:
                self.progress(cursor.phase, done)
            if done < self.page:
                return

    def _read(self, page: Callable[[Any, Cursor, bool], int], cursor: Cursor) -> int:
        return page(self.db.reader(), cursor, False)

    def _write(self, page: Callable[[Any, Cursor, bool], int], cursor: Cursor, conn: Any) -> int:
        done = page(conn, cursor, True)
        cursor.save(self.ops, conn)
        return done

    # -- messages: text, original, FTS, vectors ---------------------------------------------------------

    def _messages(self, conn: Any, cursor: Cursor, apply: bool) -> int:
        rows = self.ops.rewrite.message_page(conn, cursor.after, self.page)
        changed = self._pending
        for ident, session, kind, text, original, digest, date_terms in rows:
            new_text = storable(self.options.redactor.redact(text))
            new_original = self._original(original)
            text_changed = cursor.tally.note("outcomes" if kind == "outcome" else "messages", text, new_text)
            original_changed = cursor.tally.note("originals", original, new_original)
            if apply and (text_changed or original_changed):
                new_digest = self._identity(conn, session, original, new_original, bytes(digest), cursor.tally)
                self.ops.rewrite.rewrite_message(
                    conn,
                    ident,
                    old_text=text,
                    date_terms=date_terms,
                    text=new_text,
                    original=new_original,
                    content_hash=new_digest,
                )
                if text_changed:
                    changed.append(ident)
        cursor.tally.requeued += len(changed)
        if rows:
            cursor.after = int(rows[-1][0])
        return len(rows)

    def _original(self, original: str) -> str:
        """The stored original as the current rules keep it (unchanged when originals are kept verbatim)."""
        if not self.options.redact_originals:
            return original
        value = json.loads(original)
        redacted = self.options.redactor.redact_value(value)
        return original if redacted == value else canonical_json(redacted)

    def _identity(
        self, conn: Any, session: int, original: str, new_original: str, digest: bytes, tally: Tally
    ) -> bytes:
        """The content hash after the rescan: the new original's hash when the old one was its original's."""
        if original == new_original or digest != _sha(original):
            return digest
        fresh = _sha(new_original)
        if self.ops.rewrite.identity_taken(conn, session, fresh):
            return digest
        tally.identities += 1
        return fresh

    # -- the other tables -------------------------------------------------------------------------------

    def _compactions(self, conn: Any, cursor: Cursor, apply: bool) -> int:
        rows = self.ops.rewrite.compaction_page(conn, cursor.after, self.page)
        for ident, summary, reason in rows:
            new_summary, new_reason = self._free(summary), self._free(reason)
            changed = cursor.tally.note("summaries", summary, new_summary)
            changed = cursor.tally.note("reasons", reason, new_reason) or changed
            if apply and changed:
                self.ops.rewrite.set_compaction_text(conn, ident, new_summary, new_reason)
        if rows:
            cursor.after = int(rows[-1][0])
        return len(rows)

    def _subagents(self, conn: Any, cursor: Cursor, apply: bool) -> int:
        rows = self.ops.rewrite.link_page(conn, cursor.after, self.page)
        for ident, reason in rows:
            new_reason = self._free(reason)
            if cursor.tally.note("reasons", reason, new_reason) and apply:
                self.ops.rewrite.set_link_reason(conn, ident, new_reason)
        if rows:
            cursor.after = int(rows[-1][0])
        return len(rows)

    def _snapshots(self, conn: Any, cursor: Cursor, apply: bool) -> int:
        """A snapshot's only text is its name; a name the rules now redact is renamed (``-<id>`` if taken)."""
        rows = self.ops.rewrite.snapshot_page(conn, cursor.after, self.page)
        for ident, name in rows:
            new_name = storable(self.options.redactor.redact(name))
            if cursor.tally.note("snapshots", name, new_name) and apply:
                self.ops.rewrite.rename_snapshot(conn, ident, new_name)
        if rows:
            cursor.after = int(rows[-1][0])
        return len(rows)

    def _free(self, text: str | None) -> str | None:
        redacted = self.options.redactor.redact_optional(text)
        return None if redacted is None else storable(redacted)

    # -- archives ---------------------------------------------------------------------------------------

    def _archives(self, cursor: Cursor) -> None:
        """Each archive rewritten whole, atomically (a ``.partial`` file, fsynced, then renamed), 0600."""
        for path in sorted(self.archive_dir.glob("*.jsonl.gz")) if self.archive_dir.is_dir() else []:
            if path.name <= str(cursor.after):
                continue
            records = self._archive(path, cursor.tally)
            if not self.dry_run:
                cursor.after = path.name
                self.db.write(lambda conn: cursor.save(self.ops, conn))
            if self.progress is not None:
                self.progress("archives", records)

    def _archive(self, path: Path, tally: Tally) -> int:
        partial = path.with_name(path.name + ".partial")
        count = changed = 0
        raw = None if self.dry_run else os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb")
        out = None if raw is None else gzip.GzipFile(fileobj=raw, mode="wb")
        try:
            with gzip.open(path, "rt", encoding="utf-8") as lines:
                for line in lines:
                    count += 1
                    new_line = self._archive_line(line, tally)
                    changed += new_line != line
                    if out is not None:
                        out.write(new_line.encode("utf-8", "surrogatepass"))
            if out is not None and raw is not None:
                out.close()
                raw.flush()
                os.fsync(raw.fileno())
                raw.close()
                if changed:
                    os.replace(partial, path)
        finally:
            if out is not None and raw is not None:
                out.close()
                raw.close()
                partial.unlink(missing_ok=True)
        if changed:
            tally.places["archives"] += 1
            tally.places["archivedMessages"] += changed
        return count

    def _archive_line(self, line: str, tally: Tally) -> str:
        if not line.strip():
            return line
        record = json.loads(line)
        if not isinstance(record, dict):
            return line
        before = dict(record)
        for key in ("text", "summary", "reason"):
            if isinstance(record.get(key), str):
                record[key] = storable(self.options.redactor.redact(record[key]))
                tally.note(None, before[key], record[key])
        if self.options.redact_originals and "message" in record:
            record["message"] = self.options.redactor.redact_value(record["message"])
            if record["message"] != before["message"]:
                old_hash = _sha(canonical_json(before["message"])).hex()
                if record.get("contentHash") == old_hash:
                    record["contentHash"] = _sha(canonical_json(record["message"])).hex()
        if record == before:
            return line
        return json.dumps(record, ensure_ascii=False) + "\n"

    # -- the end of a run -------------------------------------------------------------------------------

    def _finish(self, cursor: Cursor) -> None:
        """Merge the FTS index (its old segments go, zeroed), forget the cursor, checkpoint the WAL."""
        if cursor.tally.places.get("messages") or cursor.tally.places.get("outcomes"):
            with self.db.writer() as conn:  # outside a transaction: PostgreSQL's VACUUM cannot run in one
                self.ops.rewrite.optimize_fts(conn)
        self.db.write(lambda conn: self.ops.meta.remove(conn, CURSOR_KEY))
        if cursor.tally.places:  # an older store's free space may still hold the old text (decision 0100)
            self.ops.forgetting.zero_old_free_space(self.db)
        self.ops.file_maintenance.checkpoint_fully(self.db)

    def _secure_delete(self, on: bool) -> bool:
        """Set ``secure_delete`` on the write connection (freed bytes are zeroed); returns what it was."""
        if self.dry_run:
            return on
        return self.ops.file_maintenance.set_secure_delete(self.db, on)


def _sha(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
