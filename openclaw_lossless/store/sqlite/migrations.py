"""Schema migrations: ordered named functions, each applied in the same transaction as the row recording it.

Rules: a migration that has shipped is never edited; a change is a new function appended to ``MIGRATIONS``.
A database that records a migration this code does not know was written by a newer version: we refuse to
touch it (``SchemaTooNew``) rather than guess.

The vector table is created here (m009), with the dimension of the provider recorded in ``meta`` (or the
default model's for a new store); a later change of provider recreates it empty (``embed/index.py``), since
another model's vectors cannot be converted.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from openclaw_lossless.errors import SchemaTooNew
from openclaw_lossless.store.sqlite import meta
from openclaw_lossless.store.sqlite.connection import Connection, Database
from openclaw_lossless.store.statements import archived, keyword_pairs

Migration = Callable[[Connection], None]
FREE_SPACE_ZEROED = "free_space_zeroed"  # set when no byte freed before secure_delete was always on can remain
log = logging.getLogger(__name__)


def m001_initial(conn: Connection) -> None:
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
    conn.execute(
        """CREATE TABLE sessions (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL UNIQUE,
            session_key TEXT,
            agent_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            last_seen_at REAL NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX sessions_by_key ON sessions(session_key)")
    conn.execute("CREATE INDEX sessions_by_agent ON sessions(agent_id)")
    conn.execute(
        """CREATE TABLE turns (
            id INTEGER PRIMARY KEY,
            advancement_key TEXT NOT NULL UNIQUE,
            session_rowid INTEGER NOT NULL REFERENCES sessions(id),
            committed_at REAL NOT NULL,
            message_count INTEGER NOT NULL,
            heartbeat INTEGER NOT NULL DEFAULT 0
        )"""
    )
    # Append-only. The explicit INTEGER PRIMARY KEY keeps ids (citations, FTS rowids) stable across VACUUM.
    conn.execute(
        """CREATE TABLE messages (
            id INTEGER PRIMARY KEY,
            session_rowid INTEGER NOT NULL REFERENCES sessions(id),
            agent_id TEXT NOT NULL,
            turn_rowid INTEGER REFERENCES turns(id),
            role TEXT NOT NULL,
            kind TEXT NOT NULL DEFAULT 'message',
            created_at REAL NOT NULL,
            stored_at REAL NOT NULL,
            text TEXT NOT NULL,
            original TEXT NOT NULL,
            content_hash BLOB NOT NULL,
            window_key TEXT NOT NULL,
            tokens INTEGER NOT NULL,
            importance REAL,
            importance_label TEXT,
            cites INTEGER,
            UNIQUE (session_rowid, content_hash)
        )"""
    )
    conn.execute("CREATE INDEX messages_by_agent ON messages(agent_id, id)")
    conn.execute(
        """CREATE VIRTUAL TABLE messages_fts USING fts5(
            text, content='messages', content_rowid='id', tokenize='porter unicode61 remove_diacritics 2'
        )"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, text) VALUES (new.id, new.text);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END"""
    )
    conn.execute("CREATE TABLE embedding_backlog (message_id INTEGER PRIMARY KEY)")
    conn.execute(
        """CREATE TABLE embedding_cache (
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            text_hash BLOB NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (provider, model, text_hash)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """CREATE TABLE compactions (
            id INTEGER PRIMARY KEY,
            session_rowid INTEGER NOT NULL REFERENCES sessions(id),
            recorded_at REAL NOT NULL,
            tokens_before INTEGER,
            tokens_after INTEGER,
            compacted INTEGER NOT NULL,
            summary TEXT,
            reason TEXT,
            last_message_id INTEGER
        )"""
    )
    conn.execute(
        """CREATE TABLE snapshots (
            id INTEGER PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            session_rowid INTEGER NOT NULL REFERENCES sessions(id),
            last_message_id INTEGER,
            created_at REAL NOT NULL,
            automatic INTEGER NOT NULL DEFAULT 0,
            compaction_id INTEGER REFERENCES compactions(id)
        )"""
    )
    conn.execute(
        """CREATE TABLE subagent_links (
            id INTEGER PRIMARY KEY,
            parent_session_key TEXT NOT NULL,
            child_session_key TEXT NOT NULL UNIQUE,
            context_mode TEXT,
            spawned_at REAL NOT NULL,
            ended_at REAL,
            ended_reason TEXT
        )"""
    )
    conn.execute("CREATE INDEX subagent_links_by_parent ON subagent_links(parent_session_key)")
    conn.execute(
        """CREATE TABLE archives (
            id INTEGER PRIMARY KEY,
            path TEXT NOT NULL,
            created_at REAL NOT NULL,
            first_message_id INTEGER NOT NULL,
            last_message_id INTEGER NOT NULL,
            message_count INTEGER NOT NULL
        )"""
    )


_MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December")  # fmt: skip
# "8 May 2023" (UTC, the calendar the recalled lines print): the words a person uses for the day a message was
# written. A pure function of created_at, so it can be a generated column that FTS5 reads like any other.
DATE_TERMS = (
    "CAST(strftime('%d', created_at, 'unixepoch') AS INTEGER) || ' ' || CASE strftime('%m', created_at, 'unixepoch')"
    + "".join(f" WHEN '{number:02d}' THEN '{name}'" for number, name in enumerate(_MONTHS, 1))
    + " END || ' ' || strftime('%Y', created_at, 'unixepoch')"
)


def m002_date_terms(conn: Connection) -> None:
    """Index each message's date as words beside its text, and index messages by session for neighbours.

    Why: a question that names a day ("what did Nate cook on 9 November, 2022?") shares no word with the
    message written that day, only its date; as a second FTS column the date makes that message a keyword
    hit. The column is VIRTUAL (computed on read, nothing stored per row) and generated, so FTS5 ``rebuild``
    (``reindex``, ``doctor``) re-derives it like the text. The external-content FTS table must be recreated
    to gain a column; its content lives in ``messages``, so nothing is lost, and ``rebuild`` re-indexes every
    stored message in this same transaction.

    ``messages_by_session`` serves the neighbour lookup (the messages just before and after a hit in its
    session) as a short index range per hit, whatever the size of the history.
    """
    conn.execute(f"ALTER TABLE messages ADD COLUMN date_terms TEXT GENERATED ALWAYS AS ({DATE_TERMS}) VIRTUAL")
    conn.execute("DROP TRIGGER messages_fts_insert")
    conn.execute("DROP TRIGGER messages_fts_delete")
    conn.execute("DROP TABLE messages_fts")
    conn.execute(
        """CREATE VIRTUAL TABLE messages_fts USING fts5(
            text, date_terms, content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, text, date_terms) VALUES (new.id, new.text, new.date_terms);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, text, date_terms)
            VALUES ('delete', old.id, old.text, old.date_terms);
        END"""
    )
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")
    conn.execute("CREATE INDEX messages_by_session ON messages(session_rowid, id)")


def m003_embedding_cache_identity(conn: Connection) -> None:
    """Key cached vectors by everything that shapes them: provider, model, variant and dimension.

    Why: keyed by (provider, model, text hash) alone, a changed ``EMBEDDING_DIMENSIONS`` with the same model
    found the old vectors cached, so the worker got vectors of the old shape on every retry: the backlog
    never drained and recall stayed on keyword search. The vectors cached so far are kept: a row's dimension
    is its length (float32), and its variant is ``api``, the only variant of the only provider that has
    written the cache (the local model is never cached). Rows of any other provider (test fakes) are
    dropped: a cache miss costs one embedding, never a message.
    """
    conn.execute("ALTER TABLE embedding_cache RENAME TO embedding_cache_m001")
    conn.execute(
        """CREATE TABLE embedding_cache (
            provider TEXT NOT NULL,
            model TEXT NOT NULL,
            variant TEXT NOT NULL,
            dimension INTEGER NOT NULL,
            text_hash BLOB NOT NULL,
            vector BLOB NOT NULL,
            PRIMARY KEY (provider, model, variant, dimension, text_hash)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        "INSERT INTO embedding_cache (provider, model, variant, dimension, text_hash, vector)"
        " SELECT provider, model, 'api', length(vector) / 4, text_hash, vector FROM embedding_cache_m001"
        " WHERE provider = 'openai-compatible'"
    )
    conn.execute("DROP TABLE embedding_cache_m001")


def m004_session_references_indexed(conn: Connection) -> None:
    """Index every table that refers to a session by that reference.

    Why: a spawn registers its child's session and a rollback deletes it again; with foreign keys on,
    SQLite checks each referring table for rows naming the deleted session, and without an index that check
    is a scan of every turn (and compaction and snapshot) ever stored. ``messages`` is already indexed by
    session (``messages_by_session``).
    """
    conn.execute("CREATE INDEX turns_by_session ON turns(session_rowid)")
    conn.execute("CREATE INDEX compactions_by_session ON compactions(session_rowid)")
    conn.execute("CREATE INDEX snapshots_by_session ON snapshots(session_rowid)")


def m005_messages_scope_index(conn: Connection) -> None:
    """A covering index from a message's id to its scope: agent and session.

    Why: the keyword lane ranks every message holding the query's words (up to 10,000 under the term limit,
    ``store/sqlite/term_stats.py``) and keeps those in the recall scope. Checked against the table, each match loads
    its message's row, text and all (a page or more apiece), so at 100,000 messages the scope check took as
    long as the BM25 ranking itself. This index holds only the id, agent and session, ~20 bytes a message, and
    its pages stay in cache (figures: docs/decisions/0009).
    """
    conn.execute("CREATE INDEX messages_scope ON messages(id, agent_id, session_rowid)")


def m006_compaction_status(conn: Connection) -> None:
    """Record what each host compaction came to: ``compacted``, ``failed``, ``skipped`` or ``not-compacted``.

    Why: a compaction the host tried and failed (``ok: false``), or found nothing to compact, was counted in
    ``/stats`` and got a ``pre-compaction-N`` snapshot as if the host had summarised turns away. Only a
    ``compacted`` one is counted as a compaction and snapshotted now; the others stay on record with their
    reason. Rows recorded before this could not tell a failure from nothing to compact (the plugin sent only
    ``compacted``): those that did not compact become ``not-compacted``. Their snapshots are left alone
    (snapshots are never deleted).
    """
    conn.execute("ALTER TABLE compactions ADD COLUMN status TEXT NOT NULL DEFAULT 'compacted'")
    conn.execute("UPDATE compactions SET status = 'not-compacted' WHERE compacted = 0")


def m007_forgotten(conn: Connection) -> None:
    """Tombstones of forgotten messages: their identity in their session, never their text.

    Why: ``forget`` removes a message for good, but copies of it live outside the store (OpenClaw's own
    transcripts, older exports, a re-delivered turn) and every way back in goes through ``insert_row``, which
    refuses an identity recorded here. ``content_hash`` is the store's own identity of the message;
    ``window_key`` (role, host timestamp and text hashed before redaction) is kept only for a dated message,
    so a copy captured under other redaction rules is refused too, while a later undated "yes" is not.
    """
    conn.execute(
        """CREATE TABLE forgotten (
            id INTEGER PRIMARY KEY,
            session_id TEXT NOT NULL,
            content_hash BLOB NOT NULL,
            window_key TEXT,
            message_id INTEGER,
            forgotten_at REAL NOT NULL,
            UNIQUE (session_id, content_hash)
        )"""
    )
    conn.execute("CREATE INDEX forgotten_by_window ON forgotten(session_id, window_key) WHERE window_key IS NOT NULL")


def m008_message_days(conn: Connection) -> None:
    """The days each message refers to ("last Saturday" said on 8 May 2023: 6 May), read at capture.

    Why: a question that names a time ("what did I do last Saturday?", "in May") and the message that says
    what happened then rarely share a date's words; ``store/sqlite/message_days.py`` keeps each user and assistant
    message's referenced day ranges (days since 1970-01-01, UTC) so recall can weigh a candidate whose days
    match the question's. Keyed by message, so recall reads a few hundred candidates' rows by primary key; a
    trigger drops a message's rows when the message is deleted (forget, archive).

    Messages already stored are not read here (a regular-expression pass over a big history would hold
    start-up): ``meta`` records the id below which they still wait, and the server reads them in the
    background, newest first (``message_days.backfill_step``).
    """
    conn.execute(
        """CREATE TABLE message_days (
            message_id INTEGER NOT NULL,
            first_day INTEGER NOT NULL,
            last_day INTEGER NOT NULL,
            PRIMARY KEY (message_id, first_day, last_day)
        ) WITHOUT ROWID"""
    )
    conn.execute(
        """CREATE TRIGGER message_days_delete AFTER DELETE ON messages BEGIN
            DELETE FROM message_days WHERE message_id = old.id;
        END"""
    )
    last = conn.execute("SELECT max(id) FROM messages").fetchone()[0]
    if last is not None:
        conn.execute("INSERT INTO meta (key, value) VALUES ('message_days_backfill_below', ?)", (str(int(last) + 1),))


DEFAULT_DIMENSION = 384  # the default local model's (all-MiniLM-L6-v2)


def m009_vectors_in_vec0(conn: Connection) -> None:
    """The message vectors become a sqlite-vec ``vec0`` table (``store/sqlite/vectors.py``), keeping every vector.

    Why: the store is meant to be searchable by other tools with sqlite-vec (``MATCH ... AND k = 10`` in any
    SQLite shell), and the int8 codes had been kept in an ordinary table that sqlite-vec cannot search.
    Nothing is embedded again: each message's int8 codes, scale and session are copied as they are, so the
    index and recall are the same before and after. A store of the version before (float32 vectors in a
    ``vec0`` table) has its vectors quantized here, by the rule this migration was written with. Vectors
    whose length does not match the recorded dimension, or that belong to no message, are not copied; such a
    message is queued to be embedded again. A store with no recorded provider has no vectors to keep.
    """
    identity = conn.execute("SELECT value FROM meta WHERE key = 'embedding.identity'").fetchone()
    dimension = int(json.loads(identity[0])["dimension"]) if identity else DEFAULT_DIMENSION
    old = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'message_vectors'").fetchone()
    if old is not None and identity is not None:
        if "vec0" in str(old[0]).lower():
            _m009_quantize_float_vec0(conn)
        else:
            conn.execute("ALTER TABLE message_vectors RENAME TO message_vectors_m008")
    elif old is not None:
        conn.execute("DROP TABLE message_vectors")
    conn.execute(  # as written here, not ``vectors.create``: a later migration may change that one's table
        "CREATE VIRTUAL TABLE message_vectors USING vec0(message_id INTEGER PRIMARY KEY,"
        f" embedding int8[{dimension}] distance_metric=cosine, session_rowid INTEGER, scale FLOAT)"
    )
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'message_vectors_m008'").fetchone():
        conn.execute(
            "INSERT INTO message_vectors (message_id, embedding, session_rowid, scale)"
            " SELECT v.message_id, vec_int8(v.codes), v.session_rowid, v.scale FROM message_vectors_m008 v"
            " WHERE length(v.codes) = ? AND EXISTS (SELECT 1 FROM messages m WHERE m.id = v.message_id)"
            " ORDER BY v.message_id",
            (dimension,),
        )
        conn.execute(
            "INSERT OR IGNORE INTO embedding_backlog (message_id) SELECT v.message_id FROM message_vectors_m008 v"
            " WHERE length(v.codes) != ? AND EXISTS (SELECT 1 FROM messages m WHERE m.id = v.message_id)",
            (dimension,),
        )
        conn.execute("DROP TABLE message_vectors_m008")
    if identity is not None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('embedding.format', 'vec0-int8-v1')")


def _m009_quantize_float_vec0(conn: Connection, batch: int = 20000) -> None:
    """Rewrite float32 ``vec0`` vectors as int8 codes with a per-vector scale into ``message_vectors_m008``.

    The rule (each vector scaled by its largest component / 127, rounded) is this migration's own copy of
    ``store/quantize.py``'s: a migration that has shipped never changes, whatever that module becomes.
    """
    conn.execute(
        "CREATE TABLE message_vectors_m008 (message_id INTEGER PRIMARY KEY, session_rowid INTEGER NOT NULL,"
        " scale REAL NOT NULL, codes BLOB NOT NULL)"
    )
    cursor = conn.execute(
        "SELECT v.message_id, m.session_rowid, v.embedding FROM message_vectors v"
        " JOIN messages m ON m.id = v.message_id"
    )
    while rows := cursor.fetchmany(batch):
        floats = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
        largest = np.abs(floats).max(axis=1)
        scales = np.where(largest > 0, largest / 127.0, 1.0).astype(np.float32)
        codes = np.clip(np.rint(floats / scales[:, None]), -127, 127).astype(np.int8)
        conn.executemany(
            "INSERT INTO message_vectors_m008 (message_id, session_rowid, scale, codes) VALUES (?, ?, ?, ?)",
            [(r[0], r[1], float(s), c.tobytes()) for r, s, c in zip(rows, scales, codes, strict=True)],
        )
    conn.execute("DROP TABLE message_vectors")


def m010_memory_files(conn: Connection) -> None:
    """The agents' workspace memory files indexed (``MEMORY.md``, ``memory/**/*.md``): one row per file.

    Why: a file's chunks are messages of the agent's ``memory-files:<agentId>`` session (kind ``memory``), so
    the keyword and vector lanes, forget, export and the size cap reach them like any message; this table
    keeps what the indexer needs to skip an unchanged file (its hash, size and mtime) and what the UI and
    doctor list (docs/workspace-memory.md).
    """
    conn.execute(
        """CREATE TABLE memory_files (
            agent_id TEXT NOT NULL,
            path TEXT NOT NULL,
            workspace TEXT NOT NULL,
            file_hash BLOB NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            chunks INTEGER NOT NULL,
            indexed_at REAL NOT NULL,
            PRIMARY KEY (agent_id, path)
        )"""
    )


def m011_unspaced_grams(conn: Connection) -> None:
    """Index text written without spaces (Chinese, Japanese, Thai, ...) and Korean as pairs of characters.

    Why: FTS5's unicode61 tokenizer makes a whole Chinese sentence one token, so a word inside it
    (``北京`` in ``我下周要去北京出差``) matched nothing. Each message's pairs (``capture/grams.py``) are
    stored in ``messages.grams`` (NULL for text with no such run: most messages, whose index and ranking stay
    as they were), and the FTS table gains them as a third column. The external-content FTS table must be
    recreated to gain a column, as in m002, and FTS5's ``rebuild`` fills it again here from every message's
    text and date words. The messages already stored are paired afterwards by the server, in the background
    and resumably (``store/sqlite/keyword_pairs.py``): a long history would hold start-up here, and an
    interrupted start would begin it again from nothing.
    """
    conn.execute("ALTER TABLE messages ADD COLUMN grams TEXT")
    conn.execute("DROP TRIGGER messages_fts_insert")
    conn.execute("DROP TRIGGER messages_fts_delete")
    conn.execute("DROP TABLE messages_fts")
    conn.execute(
        """CREATE VIRTUAL TABLE messages_fts USING fts5(
            text, date_terms, grams, content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        )"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, text, date_terms, grams)
            VALUES (new.id, new.text, new.date_terms, new.grams);
        END"""
    )
    conn.execute(
        """CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, text, date_terms, grams)
            VALUES ('delete', old.id, old.text, old.date_terms, old.grams);
        END"""
    )
    keyword_pairs.queue_all(conn, meta, "m011")
    conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')")


def m012_archived_identities(conn: Connection) -> None:
    """Identities of archived messages: their session and content hash, never their text.

    Why: the size cap moves the oldest messages into a gzip archive; with their rows went the identity
    (``UNIQUE (session_rowid, content_hash)``) that made a catch-up from the host's transcripts, an ingest or a
    re-delivered message skip them, so they were stored a second time. ``store/sqlite/archive.py`` now keeps
    each archived message's identity here (memory-file chunks excepted: the indexer stores those again on
    purpose), ``insert_records`` refuses one, an import of the archive (a restore) takes it back out, and a
    forget drops it with the message. The archives an earlier version wrote (``archives``) are read here, each
    line's session and content hash kept; an archive that cannot be read is left as it is (docs/decisions/0101).
    """
    conn.execute(
        """CREATE TABLE archived (
            session_rowid INTEGER NOT NULL,
            content_hash BLOB NOT NULL,
            message_id INTEGER NOT NULL,
            PRIMARY KEY (session_rowid, content_hash)
        ) WITHOUT ROWID"""
    )
    for (path,) in conn.execute("SELECT DISTINCT path FROM archives ORDER BY path").fetchall():
        found = list(archived.identities(Path(str(path)), "m012"))
        conn.executemany(
            "INSERT OR IGNORE INTO archived (session_rowid, content_hash, message_id)"
            " SELECT id, ?, ? FROM sessions WHERE session_id = ?",
            found,
        )
        log.info("archived identities (m012): %d read from %s", len(found), path)


MIGRATIONS: list[Migration] = [
    m001_initial,
    m002_date_terms,
    m003_embedding_cache_identity,
    m004_session_references_indexed,
    m005_messages_scope_index,
    m006_compaction_status,
    m007_forgotten,
    m008_message_days,
    m009_vectors_in_vec0,
    m010_memory_files,
    m011_unspaced_grams,
    m012_archived_identities,
]


def migrate(db: Database) -> list[str]:
    """Apply every migration not yet recorded; returns the names applied."""
    known = [fn.__name__ for fn in MIGRATIONS]
    applied = _recorded_names(db.reader())  # read first: a newer version's database is never written to
    if applied is None:
        applied = db.write(_applied_names)
    unknown = sorted(set(applied) - set(known))
    if unknown:
        raise SchemaTooNew(
            f"this database was written by a newer openclaw-lossless (migrations {', '.join(unknown)}); "
            "upgrade openclaw-lossless or point it at another --state-dir"
        )
    done: list[str] = []
    for fn in MIGRATIONS:
        if fn.__name__ not in applied:
            db.write(functools.partial(_apply, fn=fn))
            done.append(fn.__name__)
    if done[:1] == ["m001_initial"]:  # a new store: secure_delete has zeroed every byte it ever freed
        db.write(lambda conn: meta.put(conn, FREE_SPACE_ZEROED, "1"))
    return done


def _recorded_names(conn: Connection) -> list[str] | None:
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'migrations'").fetchone():
        return None
    return [row[0] for row in conn.execute("SELECT name FROM migrations")]


def _applied_names(conn: Connection) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    return [row[0] for row in conn.execute("SELECT name FROM migrations")]


def _apply(conn: Connection, fn: Migration) -> None:
    fn(conn)
    conn.execute("INSERT INTO migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
