"""Reading the host's transcripts: every one an OpenClaw installation keeps, read-only, once.

Owns reading OpenClaw's transcript stores and feeding them to the sidecar. Why: a user who installs the
plugin already has months of history that OpenClaw keeps; recall should reach it from the first turn, and
the bootstrap hook brings in a session it has never seen. The lossless store is written only through the
sidecar's ingest side (typed here as ``sink.Sink``) and ``snapshots.record_compaction``; OpenClaw's files are
never written.

It reads ``<state>/agents/<agentId>/agent/openclaw-agent.sqlite`` (OpenClaw ≥ 2026.7.2) and the older
``sessions/*.jsonl`` with their reset and deleted copies; compactions come from ``compaction`` entries (or a
shrunk JSONL transcript). Incremental and idempotent: a message's identity is its content hash, and cursors in
``meta`` (``import.cursor.<source>``) let a rerun skip what it read. The sidecar also runs it by itself
(``catchup.py``) after an outage; ``gaps.py`` reports what the store lacks (``doctor``); sessions the user's
selection excludes are never read. The database is opened ``mode=ro`` with ``query_only``.

The formats read, entry by entry, and why each choice: docs/decisions/0006-importing-openclaw-history.md.
"""

from openclaw_lossless.transcripts.reading import read_session, read_transcripts
from openclaw_lossless.transcripts.sources import ReadReport, Source, SourceReport, discover

__all__ = ["ReadReport", "Source", "SourceReport", "discover", "read_session", "read_transcripts"]
