"""The PostgreSQL schema: ordered named migrations, applied once however many sidecars start at the same moment.

The tables mirror the SQLite store's (``store/sqlite/migrations.py``, m001-m012) with PostgreSQL's own means:

- ids are ``bigint`` identities (an import may still insert explicit ids); times stay ``double precision``
  epoch seconds, the values SQLite stores, so both backends hand callers the same numbers;
- the keyword index is a stored ``tsvector`` column with a GIN index (holding the ids too since m006) instead
  of FTS5 (over a message's first ``INDEXED_CHARS`` characters: a tsvector holds at most 1 MB, FTS5 has no
  such limit): text search
  configuration ``lossless`` folds accents (``unaccent``) and stems with snowball english **without** a stop
  list, as FTS5's porter tokenizer keeps every word (recall drops stop words itself). The date words
  ("8 May 2023") are written beside the text at insert (``messages.date_terms``): a generated column cannot
  compute them, since ``to_char`` on a timestamp is not immutable;
- vectors are ``halfvec(N)`` with an HNSW index (cosine), searched in the database, so every sidecar finds
  every other's vectors; deleting a message deletes its vector and days (``ON DELETE CASCADE`` instead of
  SQLite's triggers);
- the embedding backlog carries a claim (who, until when), so sidecars draining one backlog never take the
  same rows (``backlog.py``).

Once only: ``migrate`` holds a session-level advisory lock for its whole run, on a dedicated connection,
and reads what is applied under it; a sidecar that starts meanwhile waits, then finds nothing to do. Each
migration runs in its own transaction with the row recording it. A store recording a migration this code
does not know was written by a newer version and is refused (``SchemaTooNew``) before anything is written.
Shipped migrations are never edited; a change is a new function appended to ``MIGRATIONS``.
"""

from __future__ import annotations

import gzip
import json
import logging
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
from psycopg import errors as pgerrors
from psycopg import sql

from openclaw_lossless.capture.grams import UNSPACED_CHARS, gram_text
from openclaw_lossless.errors import SchemaTooNew
from openclaw_lossless.store.postgres.connection import Connection, Database, set_search_path, translate_error

Migration = Callable[[Connection], None]
log = logging.getLogger(__name__)

# pg_advisory_lock key: "lossless" in ASCII. One key for the whole database, whatever the schema: extensions
# are per database, so two stores in two schemas must not create them at the same moment either.
MIGRATION_LOCK = 0x6C6F73736C657373
DEFAULT_DIMENSION = 384  # the default local model's (all-MiniLM-L6-v2), as in the SQLite store
# A tsvector holds at most 1 MB. Capture cuts a message's text to 20,000 characters, but an imported line
# may carry any length, and ~1 M characters of distinct words overflow it: the import would fail. A
# message's first 200,000 characters are keyword-indexed (~2.5 bytes of tsvector per character at worst in
# real text: numbers, ids, non-Latin words); the whole text is stored and recalled.
INDEXED_CHARS = 200_000
IDS_BESIDE_WORDS = "btree_gin"  # the extension that lets a GIN index hold the ids beside the words (m006)
UNSPACED_RUN = f"[{UNSPACED_CHARS}]"  # a message m009 pairs: one with a character of such a script
WORDS_BY_ID = "USING gin (id, search) WITH (fastupdate = off)"  # m006's keyword index; doctor's fix repeats it


def m001_extensions_and_text_search(conn: Connection) -> None:
    """pgvector and unaccent, created in ``public`` when the database lacks them (where an operator installed
    them already, in any schema, they are used there: ``connection.set_search_path``), and the ``lossless``
    text search configuration of this store's schema."""
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    conn.execute("CREATE EXTENSION IF NOT EXISTS unaccent WITH SCHEMA public")
    # Snowball's original Porter stemmer, as FTS5's porter tokenizer: "used" and "us" meet as they do there
    # (the English stemmer keeps them apart), which brings the keyword lane's top 20 from 0.986 to 0.992 of
    # FTS5's on LoCoMo.
    conn.execute("CREATE TEXT SEARCH DICTIONARY lossless_stem (TEMPLATE = snowball, Language = porter)")
    conn.execute("CREATE TEXT SEARCH CONFIGURATION lossless (COPY = simple)")
    conn.execute(
        "ALTER TEXT SEARCH CONFIGURATION lossless ALTER MAPPING FOR asciiword, asciihword, hword_asciipart,"
        " word, hword, hword_part WITH unaccent, lossless_stem"
    )


def m002_sessions_turns_messages(conn: Connection) -> None:
    conn.execute("CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL)")
    # Keys are compared byte by byte ("C"): a subagent's sessions are one range of keys ('agent:<id>:' ...).
    conn.execute(
        """CREATE TABLE sessions (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL UNIQUE,
            session_key text COLLATE "C",
            agent_id text NOT NULL,
            created_at double precision NOT NULL,
            last_seen_at double precision NOT NULL
        )"""
    )
    conn.execute("CREATE INDEX sessions_by_key ON sessions (session_key)")
    conn.execute("CREATE INDEX sessions_by_agent ON sessions (agent_id)")
    conn.execute(
        """CREATE TABLE turns (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            advancement_key text NOT NULL UNIQUE,
            session_rowid bigint NOT NULL REFERENCES sessions (id),
            committed_at double precision NOT NULL,
            message_count integer NOT NULL,
            heartbeat boolean NOT NULL DEFAULT false
        )"""
    )
    conn.execute("CREATE INDEX turns_by_session ON turns (session_rowid)")
    conn.execute(
        f"""CREATE TABLE messages (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_rowid bigint NOT NULL REFERENCES sessions (id),
            agent_id text NOT NULL,
            turn_rowid bigint REFERENCES turns (id),
            role text NOT NULL,
            kind text NOT NULL DEFAULT 'message',
            created_at double precision NOT NULL,
            stored_at double precision NOT NULL,
            text text NOT NULL,
            original text NOT NULL,
            content_hash bytea NOT NULL,
            window_key text NOT NULL,
            tokens bigint NOT NULL,
            importance double precision,
            importance_label text,
            cites bigint,
            date_terms text,
            search tsvector GENERATED ALWAYS AS (
                to_tsvector('lossless', left(text, {INDEXED_CHARS}))
                || to_tsvector('lossless', coalesce(date_terms, ''))
            ) STORED,
            UNIQUE (session_rowid, content_hash)
        )"""
    )
    conn.execute("CREATE INDEX messages_by_agent ON messages (agent_id, id)")
    conn.execute("CREATE INDEX messages_by_session ON messages (session_rowid, id)")
    conn.execute("CREATE INDEX messages_scope ON messages (id) INCLUDE (agent_id, session_rowid)")
    # No pending list: with it every search also scans the entries not yet merged, for a slightly cheaper
    # commit; recall is the hot path (docs/decisions/0007-postgres-keyword-index-layout.md).
    conn.execute("CREATE INDEX messages_search ON messages USING gin (search) WITH (fastupdate = off)")
    conn.execute(
        """CREATE TABLE message_days (
            message_id bigint NOT NULL REFERENCES messages (id) ON DELETE CASCADE,
            first_day integer NOT NULL,
            last_day integer NOT NULL,
            PRIMARY KEY (message_id, first_day, last_day)
        )"""
    )


def m003_embeddings(conn: Connection) -> None:
    """The backlog with its claim, the cache of vectors by text and model, and the vectors themselves."""
    conn.execute(
        """CREATE TABLE embedding_backlog (
            message_id bigint PRIMARY KEY,
            claimed_by text,
            claimed_until timestamptz
        )"""
    )
    # A worker renews its own claims with every batch it stores: found by worker, not by scanning the backlog.
    conn.execute(
        "CREATE INDEX embedding_backlog_by_worker ON embedding_backlog (claimed_by) WHERE claimed_by IS NOT NULL"
    )
    conn.execute(
        """CREATE TABLE embedding_cache (
            provider text NOT NULL,
            model text NOT NULL,
            variant text NOT NULL,
            dimension integer NOT NULL,
            text_hash bytea NOT NULL,
            vector bytea NOT NULL,
            PRIMARY KEY (provider, model, variant, dimension, text_hash)
        )"""
    )
    conn.execute(
        f"""CREATE TABLE message_vectors (
            message_id bigint PRIMARY KEY REFERENCES messages (id) ON DELETE CASCADE,
            agent_id text NOT NULL,
            session_rowid bigint NOT NULL,
            embedding halfvec({DEFAULT_DIMENSION}) NOT NULL
        )"""
    )
    conn.execute(
        "CREATE INDEX message_vectors_hnsw ON message_vectors"
        " USING hnsw (embedding halfvec_cosine_ops) WITH (m = 16, ef_construction = 200)"
    )


def m004_history(conn: Connection) -> None:
    """Compactions, snapshots, subagent links, archives and the tombstones of forgotten messages."""
    conn.execute(
        """CREATE TABLE compactions (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_rowid bigint NOT NULL REFERENCES sessions (id),
            recorded_at double precision NOT NULL,
            tokens_before bigint,
            tokens_after bigint,
            compacted boolean NOT NULL,
            summary text,
            reason text,
            last_message_id bigint,
            status text NOT NULL DEFAULT 'compacted'
        )"""
    )
    conn.execute("CREATE INDEX compactions_by_session ON compactions (session_rowid)")
    conn.execute(
        """CREATE TABLE snapshots (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            name text NOT NULL UNIQUE,
            session_rowid bigint NOT NULL REFERENCES sessions (id),
            last_message_id bigint,
            created_at double precision NOT NULL,
            automatic boolean NOT NULL DEFAULT false,
            compaction_id bigint REFERENCES compactions (id)
        )"""
    )
    conn.execute("CREATE INDEX snapshots_by_session ON snapshots (session_rowid)")
    conn.execute(
        """CREATE TABLE subagent_links (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            parent_session_key text COLLATE "C" NOT NULL,
            child_session_key text COLLATE "C" NOT NULL UNIQUE,
            context_mode text,
            spawned_at double precision NOT NULL,
            ended_at double precision,
            ended_reason text
        )"""
    )
    conn.execute("CREATE INDEX subagent_links_by_parent ON subagent_links (parent_session_key)")
    conn.execute(
        """CREATE TABLE archives (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            path text NOT NULL,
            created_at double precision NOT NULL,
            first_message_id bigint NOT NULL,
            last_message_id bigint NOT NULL,
            message_count integer NOT NULL
        )"""
    )
    conn.execute(
        """CREATE TABLE forgotten (
            id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
            session_id text NOT NULL,
            content_hash bytea NOT NULL,
            window_key text,
            message_id bigint,
            forgotten_at double precision NOT NULL,
            UNIQUE (session_id, content_hash)
        )"""
    )
    conn.execute("CREATE INDEX forgotten_by_window ON forgotten (session_id, window_key) WHERE window_key IS NOT NULL")


def m005_vectors_in_lists(conn: Connection) -> None:
    """Drop m003's HNSW index: at 1M messages it kept 0.84 of the exact top 20, the IVFFlat index
    ``vectors.keep_index`` makes in its place 0.98 (``store/postgres/vectors.py`` says how it was measured).
    The new index is made in the background by the first sidecar to start, not here: its lists are learnt
    from the vectors, minutes of work at 1M that no start-up should wait for. Until then the few searches
    that are not ranked whole read the table."""
    conn.execute("DROP INDEX IF EXISTS message_vectors_hnsw")


def m006_words_by_id(conn: Connection) -> None:
    """The keyword index on ``(id, search)`` (``btree_gin``, one of PostgreSQL's contrib modules, as
    ``unaccent``), under the same name: a ranking of a common word's newest matches (``fulltext.newer_than``)
    then reads only the postings above its start, for an index twice the size; it is rebuilt once, under the
    migration lock (figures: docs/decisions/0007). Where the extension cannot be had (not installed, or a role
    that may not create it), the plain index stays and recall is as it was: the sidecar starts all the same."""
    try:
        with conn.transaction():
            conn.execute(
                sql.SQL("CREATE EXTENSION IF NOT EXISTS {} WITH SCHEMA public").format(sql.Identifier(IDS_BESIDE_WORDS))
            )
    except (pgerrors.UndefinedFile, pgerrors.FeatureNotSupported, pgerrors.InsufficientPrivilege) as exc:
        log.warning(
            "%s could not be created (%s): the keyword index stays on the words alone, and keyword recall over a"
            " long history is slower; docs/postgresql.md says how to add it later",
            IDS_BESIDE_WORDS,
            str(exc).splitlines()[0],
        )
        return
    conn.execute("DROP INDEX messages_search")
    conn.execute(f"CREATE INDEX messages_search ON messages {WORDS_BY_ID}")


def m007_keyword_vectors_in_the_row(conn: Connection) -> None:
    """Keep a message's keyword vector in its row (``STORAGE MAIN``): when a row outgrows PostgreSQL's 2 kB
    the text goes to TOAST first, not the vector. The ranking reads the vector of each of a word's newest
    matches, twice (two ``ts_rank``), and a common word's matches are mostly the long messages; the text moved
    out instead is read for the few messages a turn shows (figures: docs/decisions/0007). Existing rows keep
    their layout until rewritten (``reindex --fts`` rewrites every vector): only the catalog changes, at once."""
    conn.execute("ALTER TABLE messages ALTER COLUMN search SET STORAGE MAIN")


def m008_memory_files(conn: Connection) -> None:
    """The agents' workspace memory files indexed: one row per file (SQLite's m010 says why)."""
    conn.execute(
        """CREATE TABLE memory_files (
            agent_id text COLLATE "C" NOT NULL,
            path text COLLATE "C" NOT NULL,
            workspace text NOT NULL,
            file_hash bytea NOT NULL,
            size bigint NOT NULL,
            mtime_ns bigint NOT NULL,
            chunks integer NOT NULL,
            indexed_at double precision NOT NULL,
            PRIMARY KEY (agent_id, path)
        )"""
    )


GRAMS_BATCH = 20_000  # messages paired per step of m009, each step logged


def m009_unspaced_grams(conn: Connection) -> None:
    """Index text written without spaces (Chinese, Japanese, Thai, ...) and Korean as pairs of characters.

    Why: the text search parser makes a whole Chinese sentence one word, so a word inside it (``北京`` in
    ``我下周要去北京出差``) matched nothing. Each message's pairs (``capture/grams.py``, the rule of this
    version: a later rule comes with a migration of its own) are stored in ``messages.grams`` (NULL for text
    with no such run: most messages, whose keyword entry and ranking stay as they were) and the ``search``
    vector is computed from the text, the date words and the pairs. A generated column's expression cannot be
    changed before PostgreSQL 17, so ``search`` and its index are made again: one rewrite of the table and
    one index build (the messages with such a run found first by a regular expression, in steps of
    ``GRAMS_BATCH`` whose progress is logged). One transaction under the migration lock: an interrupted start
    leaves the store as it was, and the next one does it again; readers keep the old index meanwhile.
    """
    conn.execute("ALTER TABLE messages ADD COLUMN IF NOT EXISTS grams text")  # a test's older store may have it
    btree_gin = conn.execute("SELECT 1 FROM pg_extension WHERE extname = %s", (IDS_BESIDE_WORDS,)).fetchone()
    conn.execute("ALTER TABLE messages DROP COLUMN search")  # its index goes with it
    candidates = conn.execute("SELECT count(*) FROM messages WHERE text ~ %s", (UNSPACED_RUN,)).fetchone()
    total, done, last = (0 if candidates is None else int(candidates[0])), 0, 0
    while rows := conn.execute(
        "SELECT id, text FROM messages WHERE id > %s AND text ~ %s ORDER BY id LIMIT %s",
        (last, UNSPACED_RUN, GRAMS_BATCH),
    ).fetchall():
        conn.execute(
            "UPDATE messages m SET grams = d.grams FROM unnest(%s::bigint[], %s::text[]) AS d(id, grams)"
            " WHERE m.id = d.id",
            ([int(row[0]) for row in rows], [gram_text(str(row[1])) for row in rows]),
        )
        done, last = done + len(rows), int(rows[-1][0])
        log.info("keyword index with pairs of characters (m009): %d of %d messages paired", done, total)
    log.info("keyword index with pairs of characters (m009): computing every message's keyword entry")
    conn.execute(
        f"""ALTER TABLE messages ADD COLUMN search tsvector GENERATED ALWAYS AS (
            to_tsvector('lossless', left(text, {INDEXED_CHARS}))
            || to_tsvector('lossless', coalesce(date_terms, ''))
            || to_tsvector('lossless', coalesce(grams, ''))
        ) STORED, ALTER COLUMN search SET STORAGE MAIN"""
    )
    words = WORDS_BY_ID if btree_gin else "USING gin (search) WITH (fastupdate = off)"
    conn.execute(f"CREATE INDEX messages_search ON messages {words}")


def m010_archived_identities(conn: Connection) -> None:
    """Identities of archived messages: their session and content hash, never their text (SQLite's m012 says
    why). The archives an earlier version wrote that this host can read are read here, each line's session and
    content hash kept; one on another sidecar's host, or unreadable, is left as it is (logged)."""
    conn.execute(  # IF NOT EXISTS: a test's older store may have it
        """CREATE TABLE IF NOT EXISTS archived (
            session_rowid bigint NOT NULL,
            content_hash bytea NOT NULL,
            message_id bigint NOT NULL,
            PRIMARY KEY (session_rowid, content_hash)
        )"""
    )
    for (path,) in conn.execute("SELECT DISTINCT path FROM archives ORDER BY path").fetchall():
        found = list(_m010_identities(Path(str(path))))
        if found:
            conn.execute(
                "INSERT INTO archived (session_rowid, content_hash, message_id)"
                " SELECT s.id, a.content_hash, a.message_id FROM unnest(%s::bytea[], %s::bigint[], %s::text[])"
                " AS a(content_hash, message_id, session_id) JOIN sessions s ON s.session_id = a.session_id"
                " ON CONFLICT DO NOTHING",
                ([f[0] for f in found], [f[1] for f in found], [f[2] for f in found]),
            )
        log.info("archived identities (m010): %d read from %s", len(found), path)


def _m010_identities(path: Path) -> Iterator[tuple[bytes, int, str]]:
    """(content hash, id, session id) of each message line of an archive this migration can read."""
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
        log.warning("archived identities (m010): %s not read: %s", path, exc)


MIGRATIONS: list[Migration] = [
    m001_extensions_and_text_search,
    m002_sessions_turns_messages,
    m003_embeddings,
    m004_history,
    m005_vectors_in_lists,
    m006_words_by_id,
    m007_keyword_vectors_in_the_row,
    m008_memory_files,
    m009_unspaced_grams,
    m010_archived_identities,
]


def migrate(db: Database) -> list[str]:
    """Apply every migration not yet recorded, once across every sidecar; returns the names applied here."""
    try:
        with psycopg.connect(db.url, autocommit=True) as conn:
            conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
            try:
                return _migrate_locked(conn, db.schema)
            finally:
                conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
    except psycopg.Error as exc:
        raise translate_error(exc) from exc


def _migrate_locked(conn: Connection, schema: str) -> list[str]:
    applied = applied_names(conn, schema)  # read first: a newer version's store is never written to
    known = [fn.__name__ for fn in MIGRATIONS]
    unknown = sorted(set(applied or ()) - set(known))
    if unknown:
        raise SchemaTooNew(
            f"this database was written by a newer openclaw-lossless (migrations {', '.join(unknown)}); "
            "upgrade openclaw-lossless or point LOSSLESS_DATABASE_URL at another database or schema"
        )
    with conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        set_search_path(conn, schema)
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name text PRIMARY KEY, applied_at double precision NOT NULL)"
        )
    done: list[str] = []
    for fn in MIGRATIONS:
        if fn.__name__ not in (applied or ()):
            with conn.transaction():
                fn(conn)
                conn.execute("INSERT INTO migrations (name, applied_at) VALUES (%s, %s)", (fn.__name__, time.time()))
            done.append(fn.__name__)
    return done


def applied_names(conn: Connection, schema: str) -> list[str] | None:
    """The migrations the schema records, or None when it has no ``migrations`` table yet."""
    table = sql.Identifier(schema, "migrations")
    found = conn.execute("SELECT to_regclass(%s)", (table.as_string(conn),)).fetchone()
    if found is None or found[0] is None:
        return None
    return [str(row[0]) for row in conn.execute(sql.SQL("SELECT name FROM {}").format(table))]
