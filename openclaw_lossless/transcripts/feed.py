"""Writing one session's entries into the store, and the cursors that make a rerun incremental."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

from openclaw_lossless.capture.records import capture
from openclaw_lossless.capture.text import window_key
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.backend import Backend, Store
from openclaw_lossless.store.model.sessions import SessionRef
from openclaw_lossless.store.model.snapshots import COMPACTED, Compaction, CompactionRecord
from openclaw_lossless.transcripts import matching, skipped
from openclaw_lossless.transcripts.entries import (
    IMPORTED_REASON,
    MALFORMED,
    agent_message,
    compaction_record,
    entry_key,
    entry_kind,
    parse_entry,
    shrink_record,
)
from openclaw_lossless.transcripts.sink import Sink
from openclaw_lossless.transcripts.sources import SourceReport
from openclaw_lossless.transcripts.transcript_only import transcript_only

CURSOR_PREFIX = "import.cursor."
COMPACTION_PREFIX = "import.compaction."
BATCH = 500


class Feed:
    """One session's entries, in transcript order, into the store: messages in batches, compactions between.

    A compaction flushes the messages before it first, so its pre-compaction snapshot ends where the host's
    transcript said it did.
    """

    def __init__(self, sink: Sink, session_id: str, session_key: str | None, report: SourceReport) -> None:
        self.sink = sink
        self.session_id = session_id
        self.session_key = session_key
        self.report = report
        self.pending: list[tuple[dict[str, Any], dict[str, Any]]] = []  # (as stored, as the host has it)
        self.touched = False
        # heartbeats committed without messages
        self.left_out = skipped.keys_of(sink.store.ops, sink.store.db.reader(), session_id)

    def add(self, entry: dict[str, Any] | None, fallback_ms: int | None) -> None:
        self.report.entries_read += 1
        kind = entry_kind(entry)
        if entry is None or kind == MALFORMED:
            self.report.skipped_malformed += 1
        elif kind == "message" and self.left_out and window_key(entry["message"]) in self.left_out:
            self.report.skipped_types["heartbeat"] = self.report.skipped_types.get("heartbeat", 0) + 1
        elif kind == "message" and transcript_only(entry["message"]):  # a /lossless exchange, a host artifact
            self.report.skipped_types["transcriptOnly"] = self.report.skipped_types.get("transcriptOnly", 0) + 1
        elif kind == "message":
            self.touched = True
            self.report.messages_seen += 1
            self.pending.append((agent_message(entry, fallback_ms), entry["message"]))
            if len(self.pending) >= BATCH:
                self.flush()
        elif kind == "compaction":
            self.touched = True
            self.flush()
            self.report.compactions += self._record(entry_key(entry), compaction_record(entry))
        else:
            self.report.skipped_types[kind] = self.report.skipped_types.get(kind, 0) + 1

    def flush(self) -> None:
        """Store the pending messages in order: runs of dated ones as a batch, each undated one on its own."""
        pending, self.pending = self.pending, []
        run: list[dict[str, Any]] = []
        for stored, raw in pending:
            if stored is raw:
                run.append(stored)
                continue
            if run:
                self.report.messages_imported += self._ingest(run)
                run = []
            self.report.messages_imported += self._ingest_undated(stored, raw)
        if run:
            self.report.messages_imported += self._ingest(run)

    def _ingest_undated(self, stored: dict[str, Any], raw: dict[str, Any]) -> int:
        """A message without a timestamp, dated by its entry: one a turn already committed is that message.

        Its window key stays the host's (undated), so assemble and the gap checks match it to the host's copy.
        """
        try:
            options, now = self.sink.capture_options, time.time()
            undated = capture(raw, options, now=now)
            record = dataclasses.replace(capture(stored, options, now=now), window_key=undated.window_key)
        except (BadRequest, UnicodeEncodeError):
            self.report.messages_seen -= 1
            self.report.skipped_malformed += 1
            return 0

        ops = self.sink.store.ops

        def work(conn: Any) -> int:
            session = ops.sessions.ensure_session(conn, self.session_id, self.session_key)
            if ops.transcript_ledger.holds_content(
                conn, session.rowid, record.content_hash
            ) or ops.messages.adopt_committed(conn, session, undated, record):
                return 0
            return len(ops.messages.insert_records(conn, session, [record]))

        stored_count = self.sink.store.db.write(work)
        if stored_count:
            self.sink.wake_worker()
        return stored_count

    def _ingest(self, batch: list[dict[str, Any]]) -> int:
        """Store the batch's dated messages the session does not hold, under this or another redaction
        (``matching.py``); when one cannot be stored, store the others one by one and count it."""
        try:
            options, now = self.sink.capture_options, time.time()
            records = [capture(message, options, now=now) for message in batch]
            ops = self.sink.store.ops

            def work(conn: Any) -> int:
                session = ops.sessions.ensure_session(conn, self.session_id, self.session_key)
                held = matching.held_otherwise(ops, conn, session.rowid, records, batch)
                fresh = [record for record, known in zip(records, held, strict=True) if not known]
                return len(ops.messages.insert_records(conn, session, fresh))

            stored = self.sink.store.db.write(work)
        except (BadRequest, UnicodeEncodeError):  # not an AgentMessage; a lone surrogate SQLite cannot bind
            if len(batch) > 1:
                return sum(self._ingest([message]) for message in batch)
            self.report.messages_seen -= 1
            self.report.skipped_malformed += 1
            return 0
        self.sink.after_write(stored)  # wakes the embedding worker, checks the size cap (as ingest does)
        return stored

    def shrank(self, key: str, before: int, after: int) -> None:
        """A legacy transcript rewritten with fewer messages: how OpenClaw compacted before ``compaction`` entries.

        Recorded before any entry of the shorter file is fed, so its snapshot ends where the longer one did.
        """
        self.touched = True
        self.flush()
        self.report.compactions += self._record(key, shrink_record(before, after))

    def _record(self, key: str, record: CompactionRecord) -> int:
        """Record the compaction unless it is already there; the key and the record share a commit.

        Already there: imported before (its key), or recorded live by the ``compact`` hook when the plugin was
        running: same session and same summary, or, for one inferred without a summary, one recorded where the
        session now ends.
        """
        meta_key = f"{COMPACTION_PREFIX}{self.session_id}.{key}"
        # Redacted as the ``compact`` hook redacts it: stored so, and compared so with one the hook recorded.
        redact = self.sink.capture_options.redactor.redact_optional
        record = dataclasses.replace(record, summary=redact(record.summary), reason=redact(record.reason))
        ops = self.sink.store.ops

        def work(conn: Any) -> int:
            if ops.meta.get(conn, meta_key) is not None:
                return 0
            session = ops.sessions.ensure_session(conn, self.session_id, self.session_key)
            live = ops.transcript_ledger.live_compaction(conn, session.rowid, record)
            if live is not None:
                compaction_id = live
            else:
                compaction_id = ops.snapshots.record_compaction(conn, session, record).compaction_id
            ops.meta.put(conn, meta_key, str(compaction_id))
            return 0 if live is not None else 1

        return self.sink.store.db.write(work)


def claim_imported(ops: Backend, conn: Any, session: SessionRef, record: CompactionRecord) -> Compaction | None:
    """The ``compact`` hook's side of ``transcript_ledger.live_compaction``: a compaction a catch-up already imported.

    A catch-up may run between OpenClaw writing the compaction entry and the hook arriving (milliseconds). The
    hook then takes the imported record (same session, same redacted summary, compacted, recorded by the import
    and not yet claimed, ``tokensBefore`` equal when both say) instead of recording the compaction a second
    time: its reason and token counts replace the import's, which also marks it claimed. Returns what
    ``record_compaction`` would, or None when there is none.
    """
    if record.status != COMPACTED or record.summary is None:
        return None
    return ops.transcript_ledger.claim_compaction(conn, session, record, IMPORTED_REASON)


def load_cursor(store: Store, name: str) -> dict[str, Any]:
    """Where a source's last import stopped (``{}``: read it from the start)."""
    stored = store.ops.meta.get(store.db.reader(), CURSOR_PREFIX + name)
    value = parse_entry(stored) if stored is not None else None
    return value or {}


def save_cursor(store: Store, name: str, value: dict[str, Any]) -> None:
    text = json.dumps(value, sort_keys=True)
    store.db.write(lambda conn: store.ops.meta.put(conn, CURSOR_PREFIX + name, text))
