"""Importing an OpenClaw installation's history: its SQLite store and legacy JSONL files, read-only, once.

The OpenClaw files here are built to the schema and entry shapes of the real openclaw@2026.9.6 package, then
imported through the live sidecar's ``Sidecar`` object and checked over HTTP.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.errors import NotFound
from openclaw_lossless.store.sqlite.connection import Connection, sqlite_module
from openclaw_lossless.transcripts import discover, read_session, read_transcripts
from tests.conversation import FACT, QUESTION
from tests.helpers import LiveSidecar, db_fingerprint

MAIN_KEY = "agent:main:main"
CHILD_KEY = "agent:main:subagent:2d2099dd-1ea3-4b36-9285-c66907a899f8"
LATER_FACT = "The deploy freeze for the payments cluster starts on the 14th."

# Verbatim from openclaw@2026.9.6, dist/openclaw-agent-board-schema-vd3Vff_q.mjs (OPENCLAW_AGENT_SCHEMA_SQL,
# agent schema 23): the tables the importer reads. OpenClaw keeps foreign keys on; the parents they name
# (conversations, ...) are left out here, so this writer keeps them off.
OPENCLAW_SCHEMA = """
CREATE TABLE IF NOT EXISTS session_nodes (
  session_key TEXT NOT NULL PRIMARY KEY,
  current_session_id TEXT NOT NULL,
  entry_json TEXT NOT NULL,
  legacy_acp_migration_json TEXT,
  entry_valid INTEGER NOT NULL DEFAULT 0 CHECK (entry_valid IN (-1, 0, 1)),
  updated_at INTEGER NOT NULL,
  status TEXT CHECK (status IS NULL OR status IN ('running', 'done', 'failed', 'killed', 'timeout')),
  created_at INTEGER,
  created_via TEXT CHECK (created_via IS NULL OR created_via IN ('operator', 'spawn', 'channel', 'cron', 'talk', 'run', 'plugin', 'internal')),
  created_actor_type TEXT CHECK (created_actor_type IS NULL OR created_actor_type IN ('human', 'agent', 'system')),
  created_actor_id TEXT,
  owner_actor_type TEXT,
  owner_actor_id TEXT,
  owner_assigned_by_type TEXT,
  owner_assigned_by_id TEXT,
  owner_assigned_at INTEGER,
  project_id TEXT,
  parent_session_key TEXT,
  spawned_by TEXT,
  fork_source_session_key TEXT,
  fork_source_session_id TEXT,
  fork_source_entry_id TEXT,
  label TEXT,
  display_name TEXT,
  category TEXT,
  icon TEXT,
  pinned_at INTEGER,
  archived_at INTEGER,
  last_read_at INTEGER,
  last_interaction_at INTEGER,
  last_activity_at INTEGER
) STRICT;

CREATE TABLE IF NOT EXISTS session_windows (
  session_id TEXT NOT NULL PRIMARY KEY,
  session_key TEXT NOT NULL,
  previous_session_id TEXT,
  reason TEXT CHECK (reason IS NULL OR reason IN ('initial', 'reset', 'rollover', 'fork', 'rewind', 'switch', 'recovery', 'compaction')),
  session_scope TEXT NOT NULL DEFAULT 'conversation' CHECK (session_scope IN ('conversation', 'shared-main', 'group', 'channel')),
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  transcript_updated_at INTEGER DEFAULT NULL,
  transcript_observed_at INTEGER DEFAULT NULL,
  session_entry_provenance INTEGER NOT NULL DEFAULT 0 CHECK (session_entry_provenance IN (0, 1)),
  acp_owned INTEGER NOT NULL DEFAULT 0 CHECK (acp_owned IN (0, 1)),
  plugin_owner_id TEXT,
  hook_external_content_source TEXT CHECK (hook_external_content_source IS NULL OR hook_external_content_source IN ('gmail', 'webhook')),
  started_at INTEGER,
  ended_at INTEGER,
  status TEXT CHECK (status IS NULL OR status IN ('running', 'done', 'failed', 'killed', 'timeout')),
  chat_type TEXT CHECK (chat_type IS NULL OR chat_type IN ('direct', 'group', 'channel')),
  channel TEXT,
  account_id TEXT,
  primary_conversation_id TEXT,
  model_provider TEXT,
  model TEXT,
  agent_harness_id TEXT,
  parent_session_key TEXT,
  spawned_by TEXT,
  display_name TEXT,
  FOREIGN KEY (session_key) REFERENCES session_nodes(session_key) ON DELETE CASCADE,
  FOREIGN KEY (primary_conversation_id) REFERENCES conversations(conversation_id) ON DELETE SET NULL
) STRICT;

CREATE TABLE IF NOT EXISTS transcript_events (
  session_id TEXT NOT NULL,
  seq INTEGER NOT NULL,
  event_json TEXT,
  created_at INTEGER NOT NULL,
  event_zstd BLOB,
  event_utf8_bytes INTEGER CHECK (event_utf8_bytes IS NULL OR event_utf8_bytes >= 0),
  navigation_json TEXT,
  PRIMARY KEY (session_id, seq),
  FOREIGN KEY (session_id) REFERENCES "session_windows"(session_id) ON DELETE CASCADE,
  CHECK (
    (event_json IS NOT NULL AND event_zstd IS NULL)
    OR (
      event_json IS NULL AND event_zstd IS NOT NULL
      AND event_utf8_bytes IS NOT NULL
      AND event_utf8_bytes BETWEEN 1 AND 4194304
      AND length(event_zstd) BETWEEN 1 AND 4194304
      AND navigation_json IS NOT NULL
    )
  ),
  CHECK (
    navigation_json IS NULL OR CASE WHEN json_valid(navigation_json) THEN coalesce(
      octet_length(navigation_json) <= 16384
      AND json_type(navigation_json, '$.version') = 'integer'
      AND json_extract(navigation_json, '$.version') = 1
      AND json_type(navigation_json, '$.report') = 'object'
      AND json_extract(navigation_json, '$.report.kind') IN ('canonical', 'leaf', 'link', 'ignored')
      AND json_type(navigation_json, '$.navigation') = 'object'
      AND json_type(navigation_json, '$.reset') = 'object'
      AND json_type(navigation_json, '$.model') = 'object'
      AND json_type(navigation_json, '$.modelBytes') = 'integer'
      AND json_extract(navigation_json, '$.modelBytes') BETWEEN 0 AND 4194304
      AND json_type(navigation_json, '$.modelWithoutCheckpointBytes') = 'integer'
      AND json_extract(navigation_json, '$.modelWithoutCheckpointBytes') BETWEEN 0 AND 4194304
      AND json_type(navigation_json, '$.withoutCustomDataBytes') = 'integer'
      AND json_extract(navigation_json, '$.withoutCustomDataBytes') BETWEEN 0 AND 4194304,
      0) ELSE 0 END
  )
) STRICT;

CREATE TABLE IF NOT EXISTS transcript_rewrite_watermarks (
  session_id TEXT NOT NULL PRIMARY KEY,
  generation TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  FOREIGN KEY (session_id) REFERENCES "session_windows"(session_id) ON DELETE CASCADE
) STRICT;
"""  # noqa: E501
# What OpenClaw stores beside a compressed row: its navigation projection (must satisfy the CHECK above).
NAVIGATION = json.dumps(
    {
        "version": 1,
        "report": {"kind": "canonical"},
        "navigation": {"type": "message"},
        "reset": {},
        "model": {},
        "modelBytes": 0,
        "modelWithoutCheckpointBytes": 0,
        "withoutCustomDataBytes": 0,
    }
)
MAIN_ID = "0e93bd1e-452f-4cd0-93a2-39ec9597e0f5"
CHILD_ID = "276e4473-1283-4f99-ac65-eae411dd7f9d"
LEGACY_ID = "5831fc2b-346e-492b-ac6c-8b1fadf0e025"
RESET_ID = "93fd0f7d-755b-4317-9c0a-c77e2b709e74"
T0 = int(time.time() * 1000) - 2 * 3600 * 1000


def _zstd() -> Any:
    for name in ("compression.zstd", "backports.zstd"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    return None


ZSTD = _zstd()
needs_zstd = pytest.mark.skipif(ZSTD is None, reason="no zstd codec installed (pip install backports.zstd)")


def iso(ms: int) -> str:
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


class Transcript:
    """One session's entries as OpenClaw appends them, each linked to the one before by ``parentId``."""

    def __init__(self, session_id: str, start_ms: int) -> None:
        self.session_id = session_id
        self.ms = start_ms
        self.last: str | None = None

    def entry(self, kind: str, **fields: Any) -> dict[str, Any]:
        self.ms += 1000
        entry = {"type": kind, "id": str(uuid.uuid4()), "parentId": self.last, "timestamp": iso(self.ms), **fields}
        self.last = entry["id"]
        return entry

    def header(self) -> dict[str, Any]:
        return {"type": "session", "version": 4, "id": self.session_id, "timestamp": iso(self.ms), "cwd": "/w"}

    def user(self, text: str) -> dict[str, Any]:
        return self.entry("message", message={"role": "user", "content": text, "timestamp": self.ms + 1000})

    def assistant(self, text: str) -> dict[str, Any]:
        message = {
            "role": "assistant",
            "content": [{"type": "text", "text": text}],
            "api": "openai-completions",
            "provider": "fake",
            "model": "fake-model",
            "usage": {"input": 100, "output": 20, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 120},
            "stopReason": "stop",
            "timestamp": self.ms + 1000,
        }
        return self.entry("message", message=message)

    def compaction(self, summary: str, first_kept: dict[str, Any]) -> dict[str, Any]:
        return self.entry(
            "compaction",
            summary=summary,
            firstKeptEntryId=first_kept["id"],
            tokensBefore=9000,
            tokensAfter=1200,
            details={"readFiles": [], "modifiedFiles": []},
            fromHook=True,
        )

    def settings(self) -> list[dict[str, Any]]:
        """The entries that carry no conversation, as a 2026.9.6 transcript begins after its header."""
        return [
            self.entry("model_change", provider="fake", modelId="fake-model"),
            self.entry("thinking_level_change", thinkingLevel="off"),
            self.entry("custom", customType="model-snapshot", data={"provider": "fake", "modelId": "fake-model"}),
        ]


def messages_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["message"] for e in entries if e.get("type") == "message" and isinstance(e.get("message"), dict)]


class AgentDatabase:
    """``<state>/agents/<agent>/agent/openclaw-agent.sqlite``, held open in WAL mode as a running OpenClaw does."""

    def __init__(self, state: Path, agent: str = "main") -> None:
        self.path = state / "agents" / agent / "agent" / "openclaw-agent.sqlite"
        self.path.parent.mkdir(parents=True)
        self.conn: Connection = sqlite_module().connect(str(self.path), isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.executescript(OPENCLAW_SCHEMA)
        self.seqs: dict[str, int] = {}

    def add_session(self, session_id: str, session_key: str) -> None:
        now = int(time.time() * 1000)
        node = json.dumps({"sessionId": session_id, "updatedAt": now})
        self.conn.execute(
            "INSERT INTO session_nodes (session_key, current_session_id, entry_json, updated_at) VALUES (?, ?, ?, ?)",
            (session_key, session_id, node, now),
        )
        self.conn.execute(
            "INSERT INTO session_windows (session_id, session_key, reason, created_at, updated_at)"
            " VALUES (?, ?, 'initial', ?, ?)",
            (session_id, session_key, now, now),
        )
        self.conn.execute(
            "INSERT INTO transcript_rewrite_watermarks (session_id, generation, updated_at) VALUES (?, ?, ?)",
            (session_id, uuid.uuid4().hex, now),
        )

    def append(self, session_id: str, *entries: dict[str, Any] | str) -> None:
        """One row per entry; a string is stored as it is (that is how a damaged row looks)."""
        for entry in entries:
            text = entry if isinstance(entry, str) else json.dumps(entry, separators=(",", ":"))
            self._insert(session_id, text, None, len(text.encode()), None)

    def append_compressed(self, session_id: str, entry: dict[str, Any], *, claimed_size: int | None = None) -> None:
        """As OpenClaw stores an entry of 1 KiB or more (``transcript-payload-*.mjs``): zstd, plus its size."""
        data = json.dumps(entry, separators=(",", ":")).encode()
        size = len(data) if claimed_size is None else claimed_size
        self._insert(session_id, None, ZSTD.compress(data), size, NAVIGATION)

    def _insert(self, session_id: str, text: str | None, packed: bytes | None, size: int, nav: str | None) -> None:
        seq = self.seqs.get(session_id, -1) + 1
        self.seqs[session_id] = seq
        self.conn.execute(
            "INSERT INTO transcript_events (session_id, seq, event_json, created_at, event_zstd, event_utf8_bytes,"
            " navigation_json) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (session_id, seq, text, int(time.time() * 1000), packed, size, nav),
        )

    def new_generation(self, session_id: str) -> None:
        """What OpenClaw does when it rewrites a transcript (repair, rewind): a new rewrite watermark."""
        self.conn.execute(
            "UPDATE transcript_rewrite_watermarks SET generation = ? WHERE session_id = ?",
            (uuid.uuid4().hex, session_id),
        )

    def close(self) -> None:
        self.conn.close()


@pytest.fixture
def openclaw(tmp_path: Path) -> Path:
    """OpenClaw's state dir (what ``$OPENCLAW_STATE_DIR`` names)."""
    return tmp_path / "openclaw"


@pytest.fixture
def agent_db(openclaw: Path) -> Iterator[AgentDatabase]:
    database = AgentDatabase(openclaw)
    yield database
    database.close()


def two_sessions(db: AgentDatabase) -> dict[str, list[dict[str, Any]]]:
    """The main session (a compaction, a torn row, a non-object message) and a subagent's; entries per session."""
    main = Transcript(MAIN_ID, T0)
    head = [main.header(), *main.settings()]
    fact, ack = main.user(FACT), main.assistant("Noted: staging rotation is on Tuesdays.")
    compaction = main.compaction("## Decisions\nThe staging password rotates on Tuesdays.", fact)
    later = [main.user("Filler about gardening tomatoes."), main.assistant("Tomatoes like full sun.")]
    not_an_object = main.entry("message", message="just a string")
    db.add_session(MAIN_ID, MAIN_KEY)
    db.append(MAIN_ID, *head, fact, ack, compaction, later[0], '{"type":"message","id":"torn', later[1], not_an_object)
    child = Transcript(CHILD_ID, T0 + 60_000)
    child_entries = [child.header(), child.user("CHILD-TASK: count the lanterns."), child.assistant("7 lanterns.")]
    db.add_session(CHILD_ID, CHILD_KEY)
    db.append(CHILD_ID, *child_entries)
    return {MAIN_ID: [fact, ack, *later], CHILD_ID: child_entries}


def write_jsonl(path: Path, lines: Sequence[dict[str, Any] | str]) -> None:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def legacy_sessions(openclaw: Path) -> dict[str, list[dict[str, Any]]]:
    """A 2026.7.1-era sessions dir: a live transcript with damaged lines, a reset one, and files to leave alone."""
    sessions = openclaw / "agents" / "main" / "sessions"
    live = Transcript(LEGACY_ID, T0)
    fact = live.user(LATER_FACT)
    undated = live.entry("message", message={"role": "assistant", "content": [{"type": "text", "text": "Noted."}]})
    later = [live.user("What about the mobile app?"), live.assistant("Push batching ships next week.")]
    compaction = live.compaction("## Decisions\nFreeze on the 14th.", later[0])
    write_jsonl(
        sessions / f"{LEGACY_ID}.jsonl",
        [
            live.header(),
            *live.settings(),
            fact,
            undated,
            "{bad json",
            "[1, 2]",
            {"type": "message", "id": "x"},
            compaction,
            "",
            *later,
        ],
    )
    old = Transcript(RESET_ID, T0 - 86_400_000)
    old_entries = [old.header(), old.user("An older session, before /new."), old.assistant("Reset soon.")]
    write_jsonl(sessions / f"{RESET_ID}.jsonl.reset.2026-06-01T10-00-00.000Z", old_entries)
    for copy in (f"{LEGACY_ID}.jsonl.bak.2026-06-01T10-00-00.000Z", f"{LEGACY_ID}.trajectory.jsonl"):
        write_jsonl(sessions / copy, old_entries)
    write_jsonl(sessions / f"{LEGACY_ID}.checkpoint.3f1c2b9e-8a7d-4c6b-9e5f-1a2b3c4d5e6f.jsonl", old_entries)
    (sessions / "sessions.json").write_text(json.dumps({"main": {"sessionId": LEGACY_ID, "updatedAt": T0}}))
    return {LEGACY_ID: [fact, undated, *later], RESET_ID: old_entries}


def recover(server: LiveSidecar, session_id: str) -> dict[str, Any]:
    response = server.client.get(f"/v1/sessions/{session_id}/messages", params={"last": 100})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def search(server: LiveSidecar, query: str, scope: str) -> list[dict[str, Any]]:
    params = {"q": query, "scope": scope, "mode": "keyword"}
    hits: list[dict[str, Any]] = server.client.get("/v1/search", params=params).json()["hits"]
    return hits


def stats(server: LiveSidecar) -> dict[str, Any]:
    body: dict[str, Any] = server.client.get("/stats").json()
    return body


def file_digests(root: Path) -> dict[str, str]:
    """Every file under OpenClaw's state dir but SQLite's shared-memory index (readers take their locks in it)."""
    return {
        path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.name.endswith("-shm")
    }


def test_a_2026_9_6_sqlite_store_is_imported_with_keys_compactions_and_damage_counted(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    expected = two_sessions(agent_db)
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.sources, report.sessions, report.messages_seen, report.messages_imported) == (1, 2, 6, 6)
    assert (report.compactions, report.skipped_malformed, report.errors) == (1, 2, 0)
    assert report.details[0].skipped_types == {"session": 2, "model_change": 1, "thinking_level_change": 1, "custom": 1}
    counts = stats(sidecar)
    assert (counts["messages"], counts["sessions"], counts["compactions"]) == (6, 2, 1)
    for session_id, key in ((MAIN_ID, MAIN_KEY), (CHILD_ID, CHILD_KEY)):
        stored = recover(sidecar, session_id)
        assert (stored["sessionKey"], stored["agentId"]) == (key, "main")
        assert [m["original"] for m in stored["messages"]] == messages_of(expected[session_id])
    snapshot = sidecar.client.get("/v1/snapshots").json()["snapshots"][0]
    assert snapshot["sessionId"] == MAIN_ID and snapshot["automatic"]
    assert snapshot["lastMessageId"] == recover(sidecar, MAIN_ID)["messages"][1]["id"], "ends before the compaction"
    hits = search(sidecar, "lanterns", "agent:main")
    assert sorted((h["sessionId"], h["role"]) for h in hits) == [(CHILD_ID, "assistant"), (CHILD_ID, "user")]


@needs_zstd
def test_compressed_rows_and_archives_are_decoded_and_a_size_mismatch_is_malformed(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    deleted = Transcript(RESET_ID, T0 - 86_400_000)
    archived = [deleted.header(), deleted.user("From a deleted session."), deleted.assistant("Archived, zstd.")]
    sessions = openclaw / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    plain = "".join(json.dumps(entry) + "\n" for entry in archived).encode()
    (sessions / f"{RESET_ID}.jsonl.deleted.2026-06-01T10-00-00.000Z.zst").write_bytes(ZSTD.compress(plain))
    main = Transcript(MAIN_ID, T0)
    long_answer = main.assistant("The lighthouse inventory: " + "brass lantern, " * 200)
    agent_db.add_session(MAIN_ID, MAIN_KEY)
    agent_db.append(MAIN_ID, main.header())
    agent_db.append_compressed(MAIN_ID, long_answer)
    agent_db.append_compressed(MAIN_ID, main.user("truncated on disk " * 80), claimed_size=10)
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.messages_imported, report.skipped_malformed, report.skipped_compressed) == (1 + 2, 1, 0)
    assert [m["original"] for m in recover(sidecar, MAIN_ID)["messages"]] == [long_answer["message"]]
    assert [m["original"] for m in recover(sidecar, RESET_ID)["messages"]] == messages_of(archived)
    assert read_transcripts(sidecar.sidecar.ingest, openclaw).messages_seen == 0


def test_a_legacy_jsonl_store_is_imported_and_damaged_lines_are_counted(sidecar: LiveSidecar, openclaw: Path) -> None:
    expected = legacy_sessions(openclaw)
    assert [(s.kind, s.session_id) for s in discover(openclaw)] == [("jsonl", LEGACY_ID), ("jsonl", RESET_ID)]
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.sources, report.sessions, report.messages_seen, report.messages_imported) == (2, 2, 6, 6)
    assert (report.compactions, report.skipped_malformed, report.errors) == (1, 3, 0)
    live = recover(sidecar, LEGACY_ID)
    assert live["sessionKey"] == MAIN_KEY, "the bare legacy key 'main' is scoped to its agent"
    undated = expected[LEGACY_ID][1]
    dated = undated["message"] | {"timestamp": int(datetime.fromisoformat(undated["timestamp"]).timestamp() * 1000)}
    fact, _, *later = expected[LEGACY_ID]
    assert [m["original"] for m in live["messages"]] == [fact["message"], dated, *messages_of(later)]
    assert live["messages"][1]["createdAt"] == dated["timestamp"] / 1000
    old = recover(sidecar, RESET_ID)
    assert old["sessionKey"] == f"agent:main:import:{RESET_ID}"
    assert [m["original"] for m in old["messages"]] == messages_of(expected[RESET_ID])
    assert [h["sessionId"] for h in search(sidecar, "deploy freeze payments", "agent:main")] == [LEGACY_ID]


def test_rerunning_imports_nothing_twice_even_without_cursors(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    two_sessions(agent_db)
    legacy_sessions(openclaw)
    first = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (first.messages_imported, first.compactions) == (12, 2)
    sidecar.wait_for_backlog()  # the embedding worker's tables settle before the fingerprint
    database = sidecar.settings
    before = db_fingerprint(database)
    again = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (again.messages_seen, again.messages_imported, again.compactions, again.skipped_malformed) == (0, 0, 0, 0)
    assert db_fingerprint(database) == before
    sidecar.sidecar.db.write(lambda conn: conn.execute("DELETE FROM meta WHERE key LIKE 'import.cursor.%'"))
    reread = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (reread.messages_seen, reread.messages_imported, reread.compactions) == (12, 0, 0)
    assert db_fingerprint(database) == before


def test_appended_entries_are_imported_exactly_once(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    two_sessions(agent_db)
    legacy_sessions(openclaw)
    read_transcripts(sidecar.sidecar.ingest, openclaw)
    main = Transcript(MAIN_ID, T0 + 600_000)
    new_rows = [main.user("Where is the spare key?"), main.assistant("Under the mat.")]
    agent_db.append(MAIN_ID, *new_rows, main.compaction("## Decisions\nKey under the mat.", new_rows[0]))
    live = Transcript(LEGACY_ID, T0 + 600_000)
    transcript = openclaw / "agents" / "main" / "sessions" / f"{LEGACY_ID}.jsonl"
    new_lines = [live.user("And the office move?"), live.assistant("Desks are booked.")]
    partial = json.dumps(live.user("half-written line"))
    with transcript.open("a") as stream:
        stream.write("".join(json.dumps(line) + "\n" for line in new_lines) + partial[:20])
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.messages_seen, report.messages_imported, report.compactions) == (4, 4, 1)
    assert report.skipped_malformed == 0, "a line still being written is left for the next run"
    with transcript.open("a") as stream:
        stream.write(partial[20:] + "\n")
    finished = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (finished.messages_seen, finished.messages_imported) == (1, 1)
    assert recover(sidecar, LEGACY_ID)["messages"][-1]["original"] == json.loads(partial)["message"]
    assert stats(sidecar)["messages"] == 12 + 5


def test_a_rewritten_or_shrunk_transcript_is_read_again_and_stores_only_what_is_new(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    expected = two_sessions(agent_db)
    read_transcripts(sidecar.sidecar.ingest, openclaw)
    agent_db.new_generation(MAIN_ID)
    rewritten = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (rewritten.messages_seen, rewritten.messages_imported, rewritten.compactions) == (4, 0, 0)
    transcript = openclaw / "agents" / "main" / "sessions" / f"{LEGACY_ID}.jsonl"
    live = Transcript(LEGACY_ID, T0)
    write_jsonl(transcript, [live.header(), live.user("A rewritten, shorter transcript.")])
    shrunk = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (shrunk.messages_seen, shrunk.messages_imported) == (1, 1)
    assert len(recover(sidecar, MAIN_ID)["messages"]) == len(messages_of(expected[MAIN_ID]))


def test_a_legacy_transcript_rewritten_shorter_is_recorded_as_a_compaction(
    sidecar: LiveSidecar, openclaw: Path
) -> None:
    """How OpenClaw compacted before ``compaction`` entries: the file rewritten with fewer messages."""
    live = Transcript(LEGACY_ID, T0)
    said = [live.user(FACT), live.assistant("Noted.")]
    said += [
        live.user("Filler about tomatoes."),
        live.assistant("Full sun."),
        live.user("And basil?"),
        live.assistant("Shade."),
    ]
    transcript = openclaw / "agents" / "main" / "sessions" / f"{LEGACY_ID}.jsonl"
    write_jsonl(transcript, [live.header(), *said])
    first = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (first.messages_imported, first.compactions) == (6, 0)
    gist = live.user("Summary so far: the staging password rotates on Tuesdays; tomatoes want sun.")
    after = [live.user("And the office move?"), live.assistant("Desks are booked.")]
    write_jsonl(transcript, [live.header(), gist, *said[-2:], *after])
    shrunk = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (shrunk.messages_seen, shrunk.messages_imported, shrunk.compactions) == (5, 3, 1)
    stored = recover(sidecar, LEGACY_ID)["messages"]
    assert [m["original"] for m in stored] == messages_of([*said, gist, *after])
    point = sidecar.sidecar.queries.compaction(1)
    assert (point.session_id, point.last_message_id) == (LEGACY_ID, stored[5]["id"]), "before the shorter file"
    assert sidecar.client.get("/v1/snapshots").json()["snapshots"][0]["name"] == "pre-compaction-1"
    assert read_transcripts(sidecar.sidecar.ingest, openclaw).compactions == 0
    write_jsonl(transcript, [live.header() | {"cwd": "/elsewhere"}, gist, *said[-2:], *after])
    same_count = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (same_count.messages_seen, same_count.messages_imported, same_count.compactions) == (5, 0, 0)
    assert stats(sidecar)["compactions"] == 1


def test_a_shrink_the_compact_hook_already_recorded_is_not_recorded_again(sidecar: LiveSidecar, openclaw: Path) -> None:
    live = Transcript(LEGACY_ID, T0)
    said = [live.user(FACT), live.assistant("Noted."), live.user("Filler."), live.assistant("Ok.")]
    transcript = openclaw / "agents" / "main" / "sessions" / f"{LEGACY_ID}.jsonl"
    write_jsonl(transcript, [live.header(), *said])
    read_transcripts(sidecar.sidecar.ingest, openclaw)
    compact = {"sessionId": LEGACY_ID, "sessionKey": MAIN_KEY, "tokensBefore": 9000, "summary": "## Goal"}
    assert sidecar.post("compact", compact).status_code == 200
    write_jsonl(transcript, [live.header(), *said[-1:]])
    assert read_transcripts(sidecar.sidecar.ingest, openclaw).compactions == 0
    assert stats(sidecar)["compactions"] == 1


def test_the_bootstrap_hook_imports_an_existing_sessions_messages(sidecar: LiveSidecar) -> None:
    openclaw = sidecar.settings.openclaw_state  # where the sidecar looks: $OPENCLAW_STATE_DIR
    database = AgentDatabase(openclaw)
    try:
        expected = two_sessions(database)
    finally:
        database.close()
    legacy = legacy_sessions(openclaw)
    child = sidecar.post("bootstrap", {"sessionId": CHILD_ID, "sessionKey": CHILD_KEY}).json()
    assert (child["reason"], child["importedMessages"]) == ("imported", 2)
    assert [m["original"] for m in recover(sidecar, CHILD_ID)["messages"]] == messages_of(expected[CHILD_ID])
    main = sidecar.post("bootstrap", {"sessionId": MAIN_ID, "sessionKey": MAIN_KEY}).json()
    assert main["importedMessages"] == 4 and stats(sidecar)["compactions"] == 1
    old = sidecar.post("bootstrap", {"sessionId": LEGACY_ID, "sessionKey": MAIN_KEY}).json()
    assert old["importedMessages"] == len(legacy[LEGACY_ID])
    assert [h["sessionId"] for h in search(sidecar, "lanterns", f"session:{CHILD_ID}")] == [CHILD_ID, CHILD_ID]
    again = sidecar.post("bootstrap", {"sessionId": CHILD_ID, "sessionKey": CHILD_KEY}).json()
    assert (again["reason"], again["importedMessages"]) == ("known", 0)
    assert stats(sidecar)["messages"] == 2 + 4 + 4


def test_openclaw_files_are_byte_identical_after_import(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    two_sessions(agent_db)
    legacy_sessions(openclaw)
    before = file_digests(openclaw)
    assert "agents/main/agent/openclaw-agent.sqlite-wal" in before, "OpenClaw is running: its WAL holds the rows"
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert report.messages_imported == 12
    assert file_digests(openclaw) == before
    agent_db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    checkpointed = file_digests(openclaw)
    sidecar.sidecar.db.write(lambda conn: conn.execute("DELETE FROM meta WHERE key LIKE 'import.cursor.%'"))
    read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert file_digests(openclaw) == checkpointed


def test_an_imported_fact_is_recalled_in_a_new_session_of_the_agent(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    two_sessions(agent_db)
    read_transcripts(sidecar.sidecar.ingest, openclaw)
    sidecar.wait_for_backlog()
    body = {"sessionId": "s-after-install", "sessionKey": MAIN_KEY, "messages": [], "prompt": QUESTION}
    addition = sidecar.post("assemble", body).json()["systemPromptAddition"]
    assert "rotates every Tuesday" in addition
    other = body | {"sessionId": "s-ops", "sessionKey": "agent:ops:main"}
    assert "rotates every Tuesday" not in sidecar.post("assemble", other).json()["systemPromptAddition"]


def test_import_session_brings_in_one_unseen_session_and_costs_nothing_once_known(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    two_sessions(agent_db)
    legacy_sessions(openclaw)
    assert read_session(sidecar.sidecar.ingest, openclaw, CHILD_ID, "main") == 2
    assert read_session(sidecar.sidecar.ingest, openclaw, LEGACY_ID, "main") == 4
    assert stats(sidecar)["sessions"] == 2
    sidecar.wait_for_backlog()
    before = db_fingerprint(sidecar.settings)
    assert read_session(sidecar.sidecar.ingest, openclaw, CHILD_ID, "main") == 0
    assert read_session(sidecar.sidecar.ingest, openclaw, "no-such-session", "main") == 0
    assert read_session(sidecar.sidecar.ingest, openclaw, "../../etc", "../main") == 0
    assert db_fingerprint(sidecar.settings) == before
    rest = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (rest.messages_seen, rest.messages_imported) == (4 + 2, 4 + 2), "only the sessions not yet imported"


def test_an_unreadable_store_is_reported_and_the_others_are_imported(sidecar: LiveSidecar, openclaw: Path) -> None:
    broken = openclaw / "agents" / "broken" / "agent" / "openclaw-agent.sqlite"
    broken.parent.mkdir(parents=True)
    broken.write_bytes(b"this is not a database" * 100)
    legacy_sessions(openclaw)
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert report.errors == 1 and report.details[0].error is not None
    assert report.details[0].source == "agents/broken/agent/openclaw-agent.sqlite"
    assert report.messages_imported == 6
    assert broken.read_bytes() == b"this is not a database" * 100


def test_a_missing_state_dir_is_a_clear_error(sidecar: LiveSidecar, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="OPENCLAW_STATE_DIR"):
        read_transcripts(sidecar.sidecar.ingest, tmp_path / "no-openclaw-here")
    assert read_session(sidecar.sidecar.ingest, tmp_path / "no-openclaw-here", MAIN_ID, "main") == 0


def test_progress_counts_up_to_the_planned_total(sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase) -> None:
    two_sessions(agent_db)
    legacy_sessions(openclaw)
    seen: list[tuple[int, int]] = []
    read_transcripts(
        sidecar.sidecar.ingest, openclaw, agent="main", progress=lambda done, total: seen.append((done, total))
    )
    rows, lines = 11 + 3, 13 + 3  # every row and line is an entry to read, damaged or not
    assert seen[-1] == (rows + lines, rows + lines)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)


def test_a_session_the_plugin_captured_live_gains_only_what_it_missed(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    expected = two_sessions(agent_db)
    fact, ack, *_ = expected[MAIN_ID]
    turn = {"advancementKey": "t-1", "sessionId": MAIN_ID, "sessionKey": MAIN_KEY, "messages": messages_of([fact, ack])}
    assert sidecar.post("commit-turn", turn).json()["stored"] == 2
    summary = "## Decisions\nThe staging password rotates on Tuesdays."
    compact = {"sessionId": MAIN_ID, "sessionKey": MAIN_KEY, "tokensBefore": 9000, "summary": summary}
    assert sidecar.post("compact", compact).status_code == 200
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.messages_seen, report.messages_imported, report.compactions) == (6, 4, 0)
    assert (stats(sidecar)["messages"], stats(sidecar)["compactions"]) == (6, 1)


def test_a_lone_surrogate_is_kept_exactly_and_a_roleless_message_counted(
    sidecar: LiveSidecar, openclaw: Path, agent_db: AgentDatabase
) -> None:
    main = Transcript(MAIN_ID, T0)
    fine = [main.user("before"), main.assistant("after")]
    agent_db.add_session(MAIN_ID, MAIN_KEY)
    cut = main.user("cut emoji")
    lone_surrogate = json.dumps(cut).replace("cut emoji", "cut \\ud83d")
    agent_db.append(MAIN_ID, fine[0], lone_surrogate, fine[1], main.entry("message", message={"content": "no role"}))
    report = read_transcripts(sidecar.sidecar.ingest, openclaw)
    assert (report.messages_seen, report.messages_imported, report.skipped_malformed) == (3, 3, 1)
    originals = [m["original"] for m in recover(sidecar, MAIN_ID)["messages"]]
    assert originals[1]["content"] == "cut \ud83d"
    assert [originals[0], originals[2]] == messages_of(fine)
