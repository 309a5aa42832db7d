"""Keep the store's copy of the workspace memory files in step with the files.

A pass (at start, then every ``memoryFilesIntervalS``, or on ``POST /v1/memory-files/reindex``) ``stat``s each
memory file; an unchanged size and mtime cost nothing more, an unchanged hash only its row. A changed file is
chunked again (``chunks.py``) and compared by chunk identity (the hash of its path, lines and redacted text):
chunks no longer in the file are removed, new ones stored (keyword-searchable at once, queued for embedding),
the rest untouched, all in one write. A file gone from the workspace loses its chunks and its row. Removal is
forget's deletion and scrubbing (``store/*/memory_files.py``): a replaced chunk is never recalled again and
leaves no text in the store. The turn never waits on any of this: it runs on its own thread.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from openclaw_lossless.capture.records import CaptureOptions, MessageRecord
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.index import Nearest
from openclaw_lossless.embed.worker import EmbeddingWorker
from openclaw_lossless.memory_files.chunk_records import chunk_record
from openclaw_lossless.memory_files.chunks import Chunk, chunk_markdown
from openclaw_lossless.memory_files.workspaces import Workspace, locate, memory_paths, read_config
from openclaw_lossless.store.api import TermStats
from openclaw_lossless.store.backend import Store
from openclaw_lossless.store.model.memory_files import MemoryFile, StoredChunk, session_id_of, session_key_of

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 4 * 1024 * 1024  # a memory file larger than this is left out (and the pass says so)


@dataclass
class IndexReport:
    """What one pass did."""

    workspaces: list[str] = field(default_factory=list)
    files: int = 0
    files_changed: int = 0
    files_removed: int = 0
    chunks_added: int = 0
    chunks_removed: int = 0
    skipped: list[str] = field(default_factory=list)  # files left out, and why


def record_of(path: str, chunk: Chunk, mtime: float, options: CaptureOptions) -> MessageRecord:
    return chunk_record(path, chunk.first_line, chunk.last_line, chunk.text, mtime, options)


class MemoryIndexer:
    """Index the memory files of every agent's workspace; one pass at a time."""

    def __init__(
        self,
        settings: Settings,
        store: Store,
        options: CaptureOptions,
        index: Nearest | None,
        terms: TermStats[Any] | None,
        worker: EmbeddingWorker | None,
    ) -> None:
        self.settings = settings
        self.db, self.ops = store.db, store.ops
        self.options = options
        self.index = index
        self.terms = terms
        self.worker = worker
        self.last: IndexReport | None = None
        self.last_error: str | None = None
        self._pass = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the thread ----------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.settings.memory_files and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="lossless-memory-files", daemon=True)
            self._thread.start()

    def close(self) -> bool:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            return not self._thread.is_alive()
        return True

    def _run(self) -> None:
        interval = self.settings.memory_files_interval_s
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as exc:  # the thread's edge: the next pass tries again, and the log says why
                self.last_error = str(exc)
                log.exception("the workspace memory files could not be indexed")
            if interval <= 0 or self._stop.wait(interval):
                return

    # -- one pass ------------------------------------------------------------------------------------------

    def workspaces(self) -> list[Workspace]:
        config = read_config(self.settings.openclaw_state, self.settings.openclaw_config)
        known = self.ops.sessions.agent_ids(self.db.reader())
        return locate(self.settings.openclaw_state, config, self.settings.openclaw_workspace, sorted(known))

    def run_once(self) -> IndexReport:
        with self._pass:
            report = self._pass_over(self.workspaces())
            self.last, self.last_error = report, None
            return report

    def _pass_over(self, workspaces: list[Workspace]) -> IndexReport:
        report = IndexReport(workspaces=[f"{w.agent_id}: {w.root}" for w in workspaces])
        conn = self.db.reader()
        known = {(f.agent_id, f.path): f for f in self.ops.memory_files.files(conn)}
        held = self._held(conn)
        seen: set[tuple[str, str]] = set()
        removed: list[int] = []
        for workspace in workspaces:
            for relative, path in memory_paths(workspace.root):
                key = (workspace.agent_id, relative)
                seen.add(key)
                report.files += 1
                prior = known.get(key)
                if prior is not None and prior.chunks != held.get(key, 0):
                    prior = _with_chunks(prior, -1)  # chunks went (archived by the size cap): store them again
                removed += self._file(workspace, relative, path, prior, report)
        for agent, relative in sorted(set(known) - seen):
            removed += self.db.write(partial(self._drop, agent=agent, relative=relative))
            report.files_removed += 1
        report.chunks_removed = len(removed)
        if removed:
            if self.index is not None:
                self.index.forget_ids(removed)
            if self.terms is not None:
                self.terms.clear()
            self.ops.memory_files.scrub(self.db)
        if report.chunks_added and self.worker is not None:
            self.worker.notify()
        return report

    def _file(
        self, workspace: Workspace, relative: str, path: Path, prior: MemoryFile | None, report: IndexReport
    ) -> list[int]:
        """Bring one file's chunks in step; the ids removed."""
        try:
            status = path.stat()
            if status.st_size > MAX_FILE_BYTES:
                report.skipped.append(f"{workspace.agent_id}:{relative}: larger than {MAX_FILE_BYTES} bytes")
                return []
            root = str(workspace.root)
            now = (status.st_size, status.st_mtime_ns, root)
            if prior is not None and prior.chunks >= 0 and (prior.size, prior.mtime_ns, prior.workspace) == now:
                return []
            data = path.read_bytes()
        except OSError as exc:
            report.skipped.append(f"{workspace.agent_id}:{relative}: {exc.strerror or exc}")
            return []
        digest = hashlib.sha256(data).digest()
        row = MemoryFile(workspace.agent_id, relative, root, digest, len(data), status.st_mtime_ns, 0, time.time())
        if prior is not None and prior.file_hash == digest and prior.chunks >= 0:
            self.db.write(lambda conn: self.ops.memory_files.record_file(conn, _with_chunks(row, prior.chunks)))
            return []
        text = data.decode("utf-8", errors="replace")
        records = [record_of(relative, c, status.st_mtime_ns / 1e9, self.options) for c in chunk_markdown(text)]
        added, removed = self.db.write(lambda conn: self._replace(conn, row, records))
        report.files_changed += 1
        report.chunks_added += added
        return removed

    def _replace(self, conn: Any, row: MemoryFile, records: list[MessageRecord]) -> tuple[int, list[int]]:
        """In one write: remove the file's chunks no longer in it, store its new ones, record the file."""
        session = self.ops.sessions.ensure_session(conn, session_id_of(row.agent_id), session_key_of(row.agent_id))
        stored = _of_file(self.ops.memory_files.stored_chunks(conn, session.rowid), row.path)
        wanted = {r.content_hash for r in records}
        gone = [c.id for c in stored if c.content_hash not in wanted]
        self.ops.memory_files.remove_chunks(conn, gone)
        held = {c.content_hash for c in stored}
        new = self.ops.messages.insert_records(conn, session, [r for r in records if r.content_hash not in held])
        self.ops.memory_files.mark_chunks(conn, new)
        # What the store holds of the file: a chunk forgotten (tombstoned) is not stored again while it is there.
        kept = len(stored) - len(gone) + len(new)
        self.ops.memory_files.record_file(conn, _with_chunks(row, kept))
        return len(new), gone

    def _held(self, conn: Any) -> dict[tuple[str, str], int]:
        """The chunks stored per (agent, file), to see those that went another way (the size cap's archive)."""
        held: dict[tuple[str, str], int] = {}
        for agent, rowid in self.ops.memory_files.sessions(conn).items():
            for chunk in self.ops.memory_files.stored_chunks(conn, rowid):
                path = chunk.citation.removeprefix("file:").rpartition("#L")[0]
                held[(agent, path)] = held.get((agent, path), 0) + 1
        return held

    def _drop(self, conn: Any, agent: str, relative: str) -> list[int]:
        sessions = self.ops.memory_files.sessions(conn)
        gone: list[int] = []
        if agent in sessions:
            gone = [c.id for c in _of_file(self.ops.memory_files.stored_chunks(conn, sessions[agent]), relative)]
            self.ops.memory_files.remove_chunks(conn, gone)
        self.ops.memory_files.drop_file(conn, agent, relative)
        return gone


def _of_file(chunks: list[StoredChunk], relative: str) -> list[StoredChunk]:
    prefix = f"file:{relative}#L"
    return [c for c in chunks if c.citation.startswith(prefix)]


def _with_chunks(row: MemoryFile, chunks: int) -> MemoryFile:
    return MemoryFile(
        row.agent_id, row.path, row.workspace, row.file_hash, row.size, row.mtime_ns, chunks, row.indexed_at
    )
