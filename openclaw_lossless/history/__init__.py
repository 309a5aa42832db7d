"""Importing an existing OpenClaw installation's history: every transcript it keeps, read-only, once.

Owns reading OpenClaw's transcript stores and feeding them to the sidecar. Why: a user who installs the
plugin already has months of history that OpenClaw keeps; recall should reach it from the first turn, and
the bootstrap hook brings in a session it has never seen. The lossless store is written only through the
sidecar's ingest side (typed here as ``sink.Sink``) and ``snapshots.record_compaction``; OpenClaw's files are
never written.

Where OpenClaw 2026.9.6 keeps transcripts (read from its ``dist`` code):

- Since 2026.7.2, ``<state>/agents/<agentId>/agent/openclaw-agent.sqlite`` (``OPENCLAW_AGENT_SCHEMA_SQL`` in
  ``openclaw-agent-board-schema-*.mjs``, agent schema 23). Table ``transcript_events(session_id TEXT, seq
  INTEGER, event_json TEXT, created_at INTEGER /* ms */, event_zstd BLOB, event_utf8_bytes INTEGER,
  navigation_json TEXT, PRIMARY KEY (session_id, seq))``: one entry per row, in ``seq`` order per session.
  An entry of 1 KiB or more is usually stored zstd-compressed (``event_json`` NULL, ``event_zstd`` one frame,
  ``event_utf8_bytes`` its decoded length; ``transcript-payload-*.mjs``). The session key lives in
  ``session_windows(session_id PRIMARY KEY, session_key)`` (``session_nodes(session_key, current_session_id)``
  points at the current window; older schemas had ``sessions`` / ``session_entries`` with the same two
  columns). ``transcript_rewrite_watermarks(session_id, generation)`` changes whenever OpenClaw rewrites a
  transcript; OpenClaw watches (max seq, generation) for changes, and so do our cursors.
- Up to 2026.7.1, ``<state>/agents/<agentId>/sessions/<sessionId>.jsonl`` (``-topic-<id>`` for topics), with
  ``sessions.json`` mapping each session key to ``{sessionId, sessionFile?, ...}``. Transcripts reset or
  deleted in either era are kept beside them as ``<sessionId>.jsonl.reset.<stamp>`` / ``.deleted.<stamp>``
  (``.zst`` when compressed; ``artifacts-*.mjs``) and are imported too. Backups (``.bak.<stamp>``),
  compaction checkpoints (``.checkpoint.<uuid>.jsonl``), trajectories and the copies the SQLite migration
  leaves (``.migrated``, ``session-sqlite-import-archive/``) repeat history held elsewhere: skipped.
  Transcripts moved to the opt-in cold storage (``session_transcript_cold_archives``) are not read.

Entries: the ``session`` header (version 4); ``message`` ``{type, id, parentId, timestamp, message}`` whose
``message`` is the AgentMessage (dated by its entry when it has no timestamp); ``compaction`` ``{summary,
firstKeptEntryId, tokensBefore, tokensAfter?}``, recorded as a compaction at its place in the message order.
``model_change``, ``thinking_level_change``, ``custom``, ``reset``, ``label`` and the like carry no
conversation and are counted, not stored. Compactions are taken from ``compaction`` entries, never inferred
from gaps in the ``parentId`` chain; the one exception is a JSONL transcript without such entries that is
rewritten with fewer messages than were read from it, which is how older OpenClaw compacted: that drop is
recorded as a compaction (no summary, its snapshot ending where the longer transcript did) before the shorter
file is read. A malformed line or row is counted and skipped; a source that cannot be read is reported with its
reason and the others go on.

Incremental and idempotent: a message's identity in the store is its content hash, so reading an entry twice
stores it once. Cursors in ``meta`` (``import.cursor.<source>``: the last ``seq`` and rewrite generation per
session, or a file's byte offset, size, mtime, a hash of the bytes before the offset and the messages read)
let a rerun skip what it read; a rewritten or shrunk transcript is read again from the start. An imported
compaction is keyed by its entry id (``import.compaction.<session>.<entry>``; a shrink by the offset and hash
of what was read before it) in the transaction that records it, and one the ``compact`` hook already recorded
live (same session and summary; for a shrink, one recorded where the session ends) is not recorded again.

The sidecar also runs this import by itself (``catchup.py``) to take in turns the host recorded but never
delivered (an outage), for the sessions live capture would have seen (``coverage.py``); ``gaps.py`` reports,
without writing anything, what the host recorded that the store lacks (``doctor``). Sessions the user's
selection excludes (``selection.py``) are never read.

Read-only: the database is opened ``mode=ro`` with ``query_only``. Like any reader of a WAL database, SQLite
takes its read locks in the ``-shm`` file, and creates the empty ``-wal``/``-shm`` companions (with the
database's permissions) when OpenClaw is not running; the database and transcripts are never changed.
"""

from openclaw_lossless.history.importer import import_history, import_session
from openclaw_lossless.history.sources import ImportReport, Source, SourceReport, discover

__all__ = ["ImportReport", "Source", "SourceReport", "discover", "import_history", "import_session"]
