"""Read-only checks of a PostgreSQL store, for ``doctor`` (``store/sqlite/checks.py``'s calls).

Nothing here changes the store, also on a damaged one or one a newer version wrote:

- ``integrity_problems`` asks the ``amcheck`` extension (shipped with PostgreSQL's contrib modules) to verify
  every table (``verify_heapam``, TOAST included) and every B-tree and GIN index (``bt_index_check`` with
  ``heapallindexed``: each row has its index entry; ``gin_index_check`` from PostgreSQL 18) of the store's
  schema; IVFFlat indexes have no checker. It uses amcheck where the database has it, and otherwise installs
  it inside a transaction that is rolled back, which only a role allowed to create it may do (it is not
  a trusted extension: a superuser, or a managed service's admin role). Where neither works, it reads every
  row of every table whole, values kept out of line (TOAST) included, which finds damaged pages and
  values but not an index out of step with its table; ``amcheck_usable`` says which check ran, and an
  operator gets the full one with ``CREATE EXTENSION amcheck`` run once as a superuser (and, for a role that
  is not one, ``GRANT EXECUTE`` on amcheck's ``verify_heapam`` and ``bt_index_check``).
- ``fts_problem`` recomputes every message's keyword entry (the ``search`` column) from its text with the
  function its trigger calls (``keyword_entry``; before m009, the generated column's definition, read from
  the catalog), and compares: a stored ``tsvector`` differs when the text
  search configuration or its dictionaries changed after it was written (an upgrade's new stemmer, an
  altered ``lossless`` configuration, an edited ``unaccent`` rules file). Like FTS5's own check it reads
  every message (about 20 s at a million: docs/decisions/0009).

These two run inside a transaction that is always rolled back (a savepoint when the caller's connection is
already in one), so a check that fails leaves the caller's connection usable.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
from psycopg import pq, sql

from openclaw_lossless.store.postgres import fulltext, vectors
from openclaw_lossless.store.postgres.connection import Connection, translate_error

# The store's own schema is the first one on every connection's search path (``connection.set_search_path``).
_STORE_SCHEMA = "SELECT (parse_ident(trim(split_part(current_setting('search_path'), ',', 1))))[1]"
# The store's tables and usable indexes (an invalid one is reported as such, and amcheck refuses it).
_RELATIONS = (
    "SELECT c.oid::regclass::text, c.relkind, am.amname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
    " LEFT JOIN pg_am am ON am.oid = c.relam LEFT JOIN pg_index i ON i.indexrelid = c.oid"
    " WHERE n.nspname = %s AND c.relkind IN ('r', 'i', 'm') AND coalesce(i.indisvalid AND i.indisready, true)"
    " ORDER BY c.relkind DESC, c.relname"
)


def library_versions() -> tuple[str, str]:
    """The client side this process speaks to PostgreSQL with: the libpq library's version and psycopg's.

    (SQLite's answer is the SQLite library and the sqlite-vec it loads; here the server holds the engine and
    pgvector, whose version ``counts.vector_extension`` reads from the database.)
    """
    version = pq.version()
    return f"{version // 10000}.{version % 10000}", psycopg.__version__


def store_schema(conn: Connection) -> str:
    """The schema this connection's store lives in: the first on its search path, whether it exists yet or not."""
    row = conn.execute(_STORE_SCHEMA).fetchone()
    return "" if row is None or row[0] is None else str(row[0])


def has_table(conn: Connection, name: str) -> bool:
    """Whether the store's schema has this table (a table of that name in another schema does not count)."""
    row = conn.execute(
        "SELECT 1 FROM pg_tables WHERE schemaname = (" + _STORE_SCHEMA + ") AND tablename = %s", (name,)
    ).fetchone()
    return row is not None


def applied_migrations(conn: Connection) -> set[str] | None:
    """The names of the migrations the store records, or None when it was never migrated."""
    if not has_table(conn, "migrations"):
        return None
    table = sql.Identifier(store_schema(conn), "migrations")
    return {str(row[0]) for row in conn.execute(sql.SQL("SELECT name FROM {}").format(table))}


def keyword_index_columns(conn: Connection) -> list[str] | None:
    """The columns of the keyword index (``messages_search``) in order, or None when the store has none:
    ``["id", "search"]`` once m006 could use ``btree_gin``, ``["search"]`` where it could not."""
    row = conn.execute(
        "SELECT array_agg(a.attname::text ORDER BY k.n) FROM pg_index i"
        " CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)"
        " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
        " WHERE i.indexrelid = to_regclass(quote_ident(%s) || '.messages_search')",
        (store_schema(conn),),
    ).fetchone()
    return None if row is None or row[0] is None else [str(name) for name in row[0]]


# A ``STORAGE MAIN`` value leaves its row only when the row still outgrows this after everything else has
# (``TOAST_TUPLE_TARGET_MAIN``: 8,160 bytes on the default 8 kB pages), stored size, compressed.
MAIN_LIMIT = 8000


def keyword_vectors_out_of_row(conn: Connection, sample: int = 20_000) -> tuple[int, int, int] | None:
    """Of about ``sample`` messages (whole pages, ``TABLESAMPLE SYSTEM``), how many keep a keyword vector
    smaller than ``MAIN_LIMIT`` out of their row: the layout of a long message stored before m007, whose row
    outgrew 2 kB (since, a vector is moved out only when it alone outgrows a page, and ``reindex --fts`` would
    leave such a one where it is). Returns (messages sampled, of them so stored, messages stored); None on a
    server before PostgreSQL 17, which cannot tell (no ``pg_column_toast_chunk_id``)."""
    known = conn.execute("SELECT to_regprocedure('pg_column_toast_chunk_id(\"any\")') IS NOT NULL").fetchone()
    if known is None or not known[0]:
        return None
    estimated, share = fulltext.sample_of(conn, sample)
    counted = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE pg_column_toast_chunk_id(search) IS NOT NULL"
        " AND pg_column_size(search) < %s) FROM messages TABLESAMPLE SYSTEM (%s)",
        (MAIN_LIMIT, share),
    ).fetchone()
    assert counted is not None
    return int(counted[0]), int(counted[1]), estimated


# -- integrity -------------------------------------------------------------------------------------------------


# Where amcheck is installed, and whether this role may run the checks it uses.
_AMCHECK = (
    "SELECT n.nspname, bool_and(has_function_privilege(p.oid, 'EXECUTE')) FROM pg_extension e"
    " JOIN pg_namespace n ON n.oid = e.extnamespace"
    " JOIN pg_proc p ON p.pronamespace = n.oid AND p.proname IN ('verify_heapam', 'bt_index_check')"
    " WHERE e.extname = 'amcheck' GROUP BY n.nspname"
)


def integrity_problems(conn: Connection, limit: int = 20) -> list[str]:
    """Up to ``limit`` problems, one a line, naming the table or index; ``["ok"]`` when there is none."""
    schema = store_schema(conn)
    problems = _invalid_indexes(conn, schema)
    with conn.transaction(force_rollback=True):
        amcheck = _amcheck_schema(conn, schema)
        found = _amcheck_problems(conn, schema, amcheck, limit) if amcheck is not None else _unreadable(conn, schema)
        for problem in found:
            if len(problems) >= limit:
                break
            problems.append(problem)
    return problems[:limit] or ["ok"]


def amcheck_usable(conn: Connection) -> bool:
    """Whether ``integrity_problems`` checks with amcheck here (installed, or installable by this role)."""
    with conn.transaction(force_rollback=True):
        return _amcheck_schema(conn, store_schema(conn)) is not None


def amcheck_refused(conn: Connection) -> bool:
    """Whether amcheck is installed here but its functions are not granted to this role (so
    ``integrity_problems`` read every row instead, and the operator can grant the full check)."""
    row = conn.execute(_AMCHECK).fetchone()
    return row is not None and not row[1]


def _invalid_indexes(conn: Connection, schema: str) -> list[str]:
    """Indexes the server itself marks unusable (a build that failed half way): no extension needed. The vector
    index's next one is left out: it is invalid while a sidecar builds it, and ``doctor``'s ``vector_index``
    check says when it is there."""
    rows = conn.execute(
        "SELECT i.indexrelid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
        " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND NOT (i.indisvalid AND i.indisready)"
        " AND c.relname <> %s ORDER BY 1",
        (schema, vectors.NEXT_INDEX),
    )
    return [f"index {row[0]}: marked invalid by the server ({_invalid_fix(str(row[0]))})" for row in rows]


def _invalid_fix(index: str) -> str:
    """A rebuild's unfinished copy (``REINDEX CONCURRENTLY`` names it ``<index>_ccnew``) goes; any other is rebuilt."""
    if "_ccnew" in index:
        return f"a rebuild stopped part way left it: DROP INDEX CONCURRENTLY {index}"
    return f"rebuild it: REINDEX INDEX CONCURRENTLY {index}"


def _amcheck_schema(conn: Connection, schema: str) -> str | None:
    """The schema holding amcheck: where the database has it, else ``schema``, where it is installed in the
    caller's transaction (which the caller rolls back) when this role may; None when it cannot be had.

    amcheck installed is not amcheck usable: its functions are not granted to ``PUBLIC``, so a role the
    operator did not grant them to would get "permission denied" from every check, each read as a damaged
    table. Such a role reads every row instead, as without amcheck."""
    row = conn.execute(_AMCHECK).fetchone()
    if row is not None:
        return str(row[0]) if row[1] else None
    try:
        with conn.transaction():
            conn.execute(sql.SQL("CREATE EXTENSION amcheck SCHEMA {}").format(sql.Identifier(schema)))
    except psycopg.Error:  # not allowed (not a superuser), not shipped, or a server that takes no writes
        return None
    return schema


def _amcheck_problems(conn: Connection, schema: str, amcheck: str, limit: int) -> Iterator[str]:
    """amcheck's findings on every table and B-tree/GIN index of ``schema``."""
    has_gin = conn.execute("SELECT to_regproc(quote_ident(%s) || '.gin_index_check')", (amcheck,)).fetchone()
    for name, kind, method in conn.execute(_RELATIONS, (schema,)).fetchall():
        if kind in ("r", "m"):
            yield from _checked(conn, f"table {name}", _heap_check(amcheck, name, limit))
        elif method == "btree":
            yield from _checked(conn, f"index {name}", _function(amcheck, "bt_index_check", name, ", true"))
        elif method == "gin" and has_gin is not None and has_gin[0] is not None:
            yield from _checked(conn, f"index {name}", _function(amcheck, "gin_index_check", name, ""))


def _heap_check(amcheck: str, table: str, limit: int) -> sql.Composed:
    return sql.SQL(
        "SELECT format('block %s offset %s%s: %s', blkno, offnum, ' column ' || attnum, msg)"
        " FROM {}.verify_heapam({}::regclass, check_toast => true) LIMIT {}"
    ).format(sql.Identifier(amcheck), sql.Literal(table), sql.Literal(limit))


def _function(amcheck: str, function: str, index: str, more: str) -> sql.Composed:
    return sql.SQL("SELECT NULL FROM {}.{}({}::regclass" + more + ")").format(
        sql.Identifier(amcheck), sql.Identifier(function), sql.Literal(index)
    )


def _checked(conn: Connection, what: str, query: sql.Composed) -> Iterator[str]:
    """The rows a check returns, or the error it stops with, each named after what it checked; in a savepoint,
    so one damaged index does not stop the checks of the others."""
    try:
        with conn.transaction():
            rows = conn.execute(query).fetchall()
    except psycopg.Error as exc:
        yield f"{what}: {_first_line(exc)}"
        return
    yield from (f"{what}: {row[0]}" for row in rows if row[0] is not None)


def _unreadable(conn: Connection, schema: str) -> Iterator[str]:
    """Without amcheck: every row of every table read whole (its text form needs every value, TOAST's too)."""
    for name, kind, _ in conn.execute(_RELATIONS, (schema,)).fetchall():
        if kind in ("r", "m"):
            query = sql.SQL("SELECT NULL FROM {} t WHERE length(t::text) < 0").format(sql.SQL(name))
            yield from _checked(conn, f"table {name}", query)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


# -- the keyword index -----------------------------------------------------------------------------------------


# How a message's keyword entry is computed: by the trigger m009 made, or, in a store migrated before it, by
# the generated column's own expression.
_KEYWORD_ENTRY = (
    "SELECT 'keyword_entry(text, date_terms, grams)' FROM pg_trigger"
    " WHERE tgrelid = 'messages'::regclass AND tgname = 'messages_keyword_entry' AND tgenabled <> 'D'"
    " UNION ALL SELECT pg_get_expr(d.adbin, d.adrelid) FROM pg_attrdef d JOIN pg_attribute a"
    " ON a.attrelid = d.adrelid AND a.attnum = d.adnum WHERE d.adrelid = 'messages'::regclass"
    " AND a.attname = 'search' AND a.attgenerated = 's' LIMIT 1"
)


def fts_problem(conn: Connection) -> str | None:
    """Whether every message's keyword entry is what its text gives now; a sentence naming the first ones
    that differ, or None when they all agree."""
    row = conn.execute(_KEYWORD_ENTRY).fetchone()
    if row is None:
        return "messages.search is not computed from the text (its trigger or the column's definition is gone)"
    with conn.transaction(force_rollback=True):
        differ = conn.execute(
            sql.SQL(
                "SELECT count(*), array_agg(id ORDER BY id) FILTER (WHERE n <= 5) FROM (SELECT id,"
                " row_number() OVER (ORDER BY id) AS n FROM messages WHERE search IS DISTINCT FROM ({})) d"
            ).format(sql.SQL(str(row[0])))
        ).fetchone()
    if differ is None or not differ[0]:
        return None
    first = ", ".join(f"msg:{i}" for i in differ[1]) + (", ..." if differ[0] > len(differ[1]) else "")
    return f"{differ[0]} of the messages' keyword entries differ from what their text gives now ({first})"


# -- what doctor asks of the server, in its read-only session ----------------------------------------------------


def make_read_only(conn: Connection, lock_timeout: str) -> None:
    """Make ``conn`` a session that writes nothing and waits at most ``lock_timeout`` for a lock (doctor's)."""
    conn.execute("SET default_transaction_read_only = on")
    conn.execute(sql.SQL("SET lock_timeout = {}").format(sql.Literal(lock_timeout)))


def store_bytes(conn: Connection, schema: str) -> int:
    """What the store's tables take on the server, TOAST and indexes included; ``LockNotAvailable`` after 1 s
    when another session locks one of them (its size can wait)."""
    with conn.transaction():
        conn.execute("SET LOCAL lock_timeout = '1s'")
        row = conn.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'm')",
            (schema,),
        ).fetchone()
    return 0 if row is None else int(row[0])


def installed_extensions(conn: Connection) -> dict[str, str]:
    """The database's extensions and their versions."""
    return {str(name): str(version) for name, version in conn.execute("SELECT extname, extversion FROM pg_extension")}


def available_extensions(conn: Connection) -> set[str]:
    """The extensions the server could create (installed on its host)."""
    return {str(row[0]) for row in conn.execute("SELECT name FROM pg_available_extensions")}


def is_superuser(conn: Connection) -> bool:
    row = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user").fetchone()
    return bool(row and row[0])


def relation_count(conn: Connection, schema: str) -> int:
    """Tables, indexes and sequences in ``schema`` (``migrate-store``: a store's, another program's, or none)."""
    row = conn.execute(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s", (schema,)
    ).fetchone()
    return 0 if row is None else int(row[0])


def server_identity(conn: Connection) -> tuple[str, int]:
    """Which database of which running server this is, whatever URL reached it: the server's start time and
    the database's oid (``migrate-store`` refuses a target that is its source)."""
    row = conn.execute(
        "SELECT pg_postmaster_start_time()::text, (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    assert row is not None
    return str(row[0]), int(row[1])


def store_exists(url: str, schema: str) -> bool:
    """Whether ``schema`` on the server holds a store (its messages table): a read never creates one."""
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute(
                "SELECT 1 FROM pg_tables WHERE schemaname = %s AND tablename = 'messages'", (schema,)
            ).fetchone()
    except psycopg.Error as exc:
        raise translate_error(exc) from exc
    return row is not None
