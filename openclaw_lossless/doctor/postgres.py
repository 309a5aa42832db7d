"""``doctor`` on a PostgreSQL store (``LOSSLESS_DATABASE_URL``): the same checks as on the SQLite file, read-only.

One plain connection, in a session whose transactions are all read-only (``default_transaction_read_only``):
nothing is migrated, created or written, also where the role could (a superuser's rolled-back ``CREATE
EXTENSION amcheck`` is refused too, so only an amcheck already installed checks the indexes). The store's
schema comes first on its search path, as on the sidecar's connections, so the backend's modules
(``store/postgres/checks.py``, ``vectors.py``, ``forgetting.py``, ``backlog.py``, ``meta.py``) answer the shared
checks of ``doctor/store.py``; three checks are PostgreSQL's own: ``vector_index`` (the index a sidecar
makes), ``keyword_index`` (the ids beside the words, m006) and ``keyword_vectors`` (the vectors in their rows,
m007).
A lock held by a migration or a forget's index rebuild is waited for at most ``LOCK_TIMEOUT``, then
reported, rather than hanging the run.

The fixes name PostgreSQL's own tools (``REINDEX INDEX CONCURRENTLY``, the server's logs, ``CREATE
EXTENSION`` as a superuser); ``salvage`` reads SQLite files only. A server that cannot be reached, or that
refuses the login, is one finding saying which, with no traceback. The URL is shown without its password,
and any text from the driver has the password taken out before it is shown.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

import psycopg
from psycopg import errors as pgerrors
from psycopg.conninfo import conninfo_to_dict

from openclaw_lossless.config import Settings
from openclaw_lossless.doctor.findings import Finding
from openclaw_lossless.doctor.store_checks import Check, disk, embedder, permissions, store_checks
from openclaw_lossless.store.backend import postgres
from openclaw_lossless.store.postgres import checks, vectors
from openclaw_lossless.store.postgres.connection import Connection, set_search_path
from openclaw_lossless.store.postgres.migrations import (
    IDS_BESIDE_WORDS,
    MIGRATIONS,
    WORDS_BY_ID,
    Migration,
    m006_words_by_id,
    m007_keyword_vectors_in_the_row,
)

CONNECT_TIMEOUT_S = 10  # unless the URL sets connect_timeout: a host that drops packets is not waited on for ever
LOCK_TIMEOUT = "10s"
APPLICATION_NAME = "openclaw-lossless doctor"  # what pg_stat_activity shows for this session
EXTENSIONS = ("vector", "unaccent")  # what the first migration creates (store/postgres/migrations.m001)
INSTALL = {  # where the server gets each extension from
    "vector": "install pgvector (Debian: apt install postgresql-NN-pgvector; Docker: the pgvector/pgvector image)",
    "unaccent": "install PostgreSQL's contrib modules (Debian: they come with postgresql-NN)",
}
PROBLEMS_SHOWN = 5
LOCK_WAITED = "canceling statement due to lock timeout"  # the server's words when ``lock_timeout`` ran out
SERVER_DISK = "; the database's own disk is the PostgreSQL server's to watch"
UNREACHABLE_FIX = (
    "the server is unreachable: check LOSSLESS_DATABASE_URL (host, port or socket) and that the server runs and"
    " accepts connections from this host"
)
LOGIN_FIX = (
    "check the user and password LOSSLESS_DATABASE_URL gives (or PGPASSWORD / ~/.pgpass), and that the server's"
    " pg_hba.conf admits this user from this host"
)
LOGS_FIX = "check the PostgreSQL server's logs"
BUILD_FIX = (
    "a sidecar on this store makes it in the background within a minute of starting (its log says 'the vector"
    " index was made'); if its log says it could not, give the server the memory it asks for (about 1 GB)"
)
_LOGIN_REFUSED = re.compile(r"authentication failed|no pg_hba\.conf entry|role \".*\" does not exist|no password")
_PASSWORD_PARAMETER = re.compile(r"(^|&)password=[^&]*")
_NO_DATABASE = re.compile(r"database \"(.*)\" does not exist")


def postgres_findings(settings: Settings) -> list[Finding]:
    """Every check of a PostgreSQL store, in the order of the SQLite report (binding, embedder, permissions,
    disk, then the store), with a ``database`` finding saying which store was reached, or why none was."""
    assert settings.database_url is not None
    url = settings.database_url.get_secret_value()
    local = [embedder(settings), permissions(settings)]
    opened = connect(url, settings.database_schema)
    if isinstance(opened, Finding):
        return [_binding(None), *local, disk(settings, SERVER_DISK), opened]
    with opened as conn:
        try:
            return _store_findings(conn, settings, url, local)
        except psycopg.Error as exc:  # outside the checks: the server went away, or a catalog read was refused
            stopped = _stopped("database", exc, conn, scrubbed(_lines(exc), url))
            return [_binding(None), *local, disk(settings, SERVER_DISK), stopped]


def _store_findings(conn: Connection, settings: Settings, url: str, local: list[Finding]) -> list[Finding]:
    schema = settings.database_schema
    applied = checks.applied_migrations(conn)
    findings = [_binding(conn, migrated=applied is not None), *local, disk(settings, _store_size(conn, schema))]
    findings.append(_reached(conn, url, schema))
    known = {fn.__name__ for fn in MIGRATIONS}
    for name, check in [
        *store_checks(postgres(), settings, known, _integrity),
        ("vector_index", _vector_index),
        ("keyword_index", _keyword_index),
        ("keyword_vectors", _keyword_vectors),
    ]:
        finding = _guarded(name, check, conn, url)
        findings.append(finding)
        if finding.code in ("schema_not_migrated", "database_lost", f"{name}_locked"):
            break  # no tables to check yet, no server to ask, or each further check would wait for the lock too
    return findings


def _vector_index(conn: Connection) -> Finding:
    """The IVFFlat index a sidecar makes in the background (``store/postgres/vectors.py``): without it, a
    search of a scope too large to rank whole reads every vector, and recall's vector lane runs out of time."""
    if not vectors.exists(conn):
        return Finding("vector_index", True, "no vector table yet", code="vector_index_not_due")
    state = vectors.index_state(conn)
    lists = state.lists
    data = {"vectors": state.rows, "lists": lists, "madeFor": state.made_for, "nextUnfinished": state.unfinished}
    unfinished = (
        f"; {vectors.NEXT_INDEX} is there unfinished (a sidecar making it now, or a build cut short, which the next"
        " one drops)"
        if state.unfinished
        else ""
    )
    if lists is None and not state.due:
        detail = f"{state.rows} vectors: the index is made at {vectors.BUILD_AT}{unfinished}"
        return Finding("vector_index", True, detail, code="vector_index_not_due", data=data)
    if lists is None:
        detail = (
            f"{state.rows} vectors and no index yet: a search of more than {vectors.EXACT_ROWS} messages reads"
            f" them all{unfinished}"
        )
        return Finding("vector_index", False, detail, BUILD_FIX, code="vector_index_missing", data=data)
    detail = f"IVFFlat, {lists} lists made for {state.made_for} vectors; {state.rows} now{unfinished}"
    if state.due:
        return Finding("vector_index", True, detail + " (due again)", BUILD_FIX, code="vector_index_due", data=data)
    return Finding("vector_index", True, detail, code="vector_index_ok", data=data)


def _keyword_index(conn: Connection) -> Finding:
    """Whether the keyword index holds the ids beside the words (m006): where the server lacked ``btree_gin``
    the store works on the words alone, and a common word's ranking reads all its postings (slower at a
    million messages: docs/decisions/0007). A note, with what adds the ids, never a failure."""
    columns = checks.keyword_index_columns(conn)
    data = {"columns": columns}
    if columns is None:
        return Finding("keyword_index", True, "no keyword index yet", code="keyword_index_not_due", data=data)
    if columns[0] == "id":
        detail = "GIN on (id, search): a common word's newest matches are read alone"
        return Finding("keyword_index", True, detail, code="keyword_index_ok", data=data)
    if not _migrated(conn, m006_words_by_id):
        detail = "on the words alone until a sidecar of this version starts: it adds the ids (~12 s at 1M messages)"
        return Finding("keyword_index", True, detail, code="keyword_index_not_due", data=data)
    schema = checks.store_schema(conn)
    rebuild = f"DROP INDEX {schema}.messages_search; CREATE INDEX messages_search ON {schema}.messages {WORDS_BY_ID}"
    create = "" if IDS_BESIDE_WORDS in checks.installed_extensions(conn) else f"CREATE EXTENSION {IDS_BESIDE_WORDS}; "
    return Finding(
        "keyword_index",
        True,
        f"on the words alone: the server had no {IDS_BESIDE_WORDS} for this store (one of PostgreSQL's contrib"
        " modules), so keyword recall over a long history reads every match of a common word",
        f"with the sidecars stopped, as a superuser (or the service's admin role) in this database: {create}{rebuild}"
        " (~12 s at 1M messages)",
        code="keyword_index_words_only",
        data=data,
    )


def _migrated(conn: Connection, migration: Migration) -> bool:
    """Whether the store records ``migration`` as applied."""
    return migration.__name__ in (checks.applied_migrations(conn) or set())


def _keyword_vectors(conn: Connection) -> Finding:
    """Whether messages stored before m007 keep their keyword vectors out of their rows: the migration changes
    only the catalog, and each such message costs the keyword ranking a TOAST read, twice, until
    ``reindex --fts`` rewrites it (docs/decisions/0007 has the cost). Counted
    on a sample of the messages; a note with the fix, never a failure."""
    if not _migrated(conn, m007_keyword_vectors_in_the_row):
        detail = "the store is not at m007 yet: a sidecar of this version migrates it at its start"
        return Finding("keyword_vectors", True, detail, code="keyword_vectors_not_due")
    counted = checks.keyword_vectors_out_of_row(conn)
    if counted is None:
        detail = "a server before PostgreSQL 17 cannot tell where a message's keyword vector is stored"
        return Finding("keyword_vectors", True, detail, code="keyword_vectors_unknown")
    sampled, out, estimated = counted
    data = {"sampled": sampled, "outOfRow": out, "messages": estimated}
    if out == 0:
        detail = f"in their rows (a sample of {sampled} messages)"
        return Finding("keyword_vectors", True, detail, code="keyword_vectors_ok", data=data)
    share = out / max(sampled, 1)
    return Finding(
        "keyword_vectors",
        True,
        f"{out} of {sampled} messages sampled ({share:.1%}; ~{round(share * estimated)} of the store's) keep their"
        " keyword vector out of their row, as stored before m007: keyword recall reads each back from TOAST",
        "with the sidecars quiet, run `openclaw-lossless reindex --fts` (it rewrites every message's keyword"
        " vector into its row: one write of every message, in one transaction)",
        code="keyword_vectors_out_of_row",
        data=data,
    )


# -- the connection --------------------------------------------------------------------------------------------


def connect(url: str, schema: str) -> Connection | Finding:
    """A read-only session on the store (autocommit, as the sidecar's readers), or the finding saying why not."""
    try:
        given = conninfo_to_dict(url)
        options: dict[str, Any] = {"connect_timeout": given.get("connect_timeout") or CONNECT_TIMEOUT_S}
        if "application_name" not in given:
            options["application_name"] = APPLICATION_NAME
        conn = psycopg.connect(url, autocommit=True, **options)
    except psycopg.ProgrammingError as exc:  # a URL libpq cannot parse
        return Finding(
            "database",
            False,
            f"LOSSLESS_DATABASE_URL is not a connection URL libpq takes: {scrubbed(_lines(exc), url)}",
            "correct LOSSLESS_DATABASE_URL: postgresql://user@host:port/database",
            code="database_url_invalid",
        )
    except psycopg.Error as exc:
        return _refused(exc, url)
    try:
        checks.make_read_only(conn, LOCK_TIMEOUT)
        set_search_path(conn, schema)
    except psycopg.Error as exc:
        conn.close()
        return _refused(exc, url)
    return conn


def _refused(exc: psycopg.Error, url: str) -> Finding:
    """Why no session could be had: the server unreachable, the login refused, or no such database."""
    text = scrubbed(_lines(exc), url)
    where = f"cannot connect to the PostgreSQL store at {shown_url(url)}: {text}"
    missing = _NO_DATABASE.search(text)
    if missing is not None:
        fix = f"create it (CREATE DATABASE {missing.group(1)}, as a role that may) or correct LOSSLESS_DATABASE_URL"
        return Finding("database", False, where, fix, code="database_missing")
    if _LOGIN_REFUSED.search(text):
        return Finding("database", False, where, LOGIN_FIX, code="database_login_refused")
    return Finding("database", False, where, UNREACHABLE_FIX, code="database_unreachable")


def _reached(conn: Connection, url: str, schema: str) -> Finding:
    role = conn.info.user
    detail = f"{shown_url(url)} (schema {schema}), as {role}, in a read-only session"
    return Finding("database", True, detail, code="database_reached", data={"url": shown_url(url), "schema": schema})


def _store_size(conn: Connection, schema: str) -> str:
    """What the store takes on the server, for the disk finding, whose free space is the server's to watch."""
    try:
        size = checks.store_bytes(conn, schema)
    except pgerrors.LockNotAvailable:  # a table locked by another session: the size can wait
        return SERVER_DISK
    return f"{SERVER_DISK} (the store takes {size / 2**20:.1f} MiB there)"


# -- binding: the driver, the server, pgvector -------------------------------------------------------------------


def _binding(conn: Connection | None, *, migrated: bool = False) -> Finding:
    libpq, driver = checks.library_versions()
    client = f"psycopg {driver} (libpq {libpq})"
    data: dict[str, Any] = {"psycopg": driver, "libpq": libpq}
    if conn is None:
        return Finding("binding", True, f"{client}; the server was not reached", code="binding_ok", data=data)
    server = str(conn.info.parameter_status("server_version") or "?")
    data["server"] = server
    installed = checks.installed_extensions(conn)
    data["pgvector"] = installed.get("vector")
    missing = [name for name in EXTENSIONS if name not in installed]
    if not missing:
        detail = f"{client}, PostgreSQL {server}, pgvector {installed['vector']}"
        return Finding("binding", True, detail, code="binding_ok", data=data)
    return _extensions_missing(conn, f"{client}, PostgreSQL {server}", missing, migrated, data)


def _extensions_missing(
    conn: Connection, versions: str, missing: list[str], migrated: bool, data: dict[str, Any]
) -> Finding:
    """The extensions the store needs and the database lacks: whether the server has them to create, and who
    may (neither is trusted: a superuser, or a managed service's admin role)."""
    create = "; ".join(f"CREATE EXTENSION {name}" for name in missing)
    available = checks.available_extensions(conn)
    absent = [name for name in missing if name not in available]
    if absent:
        packages = [INSTALL[name] for name in absent]
        return Finding(
            "binding",
            False,
            f"{versions}; the server has no {', '.join(absent)} extension to create",
            f"on the database server, {'; '.join(packages)}; then, as a superuser in this database: {create}",
            code="extension_not_installed",
            data=data,
        )
    detail = f"{versions}; {', '.join(missing)} not created in database {conn.info.dbname}"
    fix = f"once, as a superuser (or the service's admin role) in this database: {create}"
    if migrated:  # the first migration made them: someone dropped one since
        return Finding("binding", False, detail, fix, code="extension_missing", data=data)
    if checks.is_superuser(conn):
        return Finding("binding", True, f"{detail} (the first start creates them)", code="binding_ok", data=data)
    detail += (
        f": the first start can create them only as a superuser (or a service's admin role), not as {conn.info.user}"
    )
    return Finding("binding", True, detail, fix, code="extension_not_created", data=data)


# -- the checks ------------------------------------------------------------------------------------------------


def _guarded(name: str, check: Check, conn: Connection, url: str) -> Finding:
    """A check's finding, or what stopped it, said for PostgreSQL: a lock, damage, a privilege, a lost server."""
    try:
        return check(conn)
    except psycopg.Error as exc:
        return _stopped(name, exc, conn, scrubbed(_lines(exc), url))


def _locked(name: str) -> Finding:
    return Finding(
        name,
        False,
        f"not checked: another session held a lock on the store for {LOCK_TIMEOUT} (a migration, VACUUM FULL, an"
        " administrator's LOCK TABLE)",
        "run doctor again when it is done (pg_stat_activity shows who holds the lock)",
        code=f"{name}_locked",
    )


def _stopped(name: str, exc: psycopg.Error, conn: Connection, text: str) -> Finding:
    if isinstance(exc, pgerrors.LockNotAvailable):
        return _locked(name)
    if isinstance(exc, pgerrors.InsufficientPrivilege):
        schema, role = checks.store_schema(conn), conn.info.user
        fix = f"GRANT USAGE ON SCHEMA {schema} TO {role}; GRANT SELECT ON ALL TABLES IN SCHEMA {schema} TO {role}"
        return Finding(name, False, f"not checked: {text}", fix, code=f"{name}_not_permitted")
    if isinstance(exc, (pgerrors.DataCorrupted, pgerrors.IndexCorrupted)):
        fix = f"{LOGS_FIX}; rebuild a damaged index (REINDEX INDEX CONCURRENTLY), restore damaged rows from a backup"
        return Finding(name, False, f"the server reports damaged data: {text}", fix, code=f"{name}_damaged")
    if conn.closed or conn.broken:
        return Finding(name, False, f"the server stopped answering: {text}", LOGS_FIX, code="database_lost")
    return Finding(name, False, text, LOGS_FIX, code=f"{name}_failed")


def _integrity(conn: Connection) -> Finding:
    """amcheck's verdict on every table and B-tree/GIN index where the database has it, else every row read.

    amcheck's functions are the superuser's unless granted: installed, but refused to this role, every row is
    read instead, and the note says how to grant the full check (never "permission denied" as damage)."""
    full = checks.amcheck_usable(conn)
    refused = not full and checks.amcheck_refused(conn)
    found = [line for line in checks.integrity_problems(conn, 20) if line != "ok"]
    problems = [line for line in found if LOCK_WAITED not in line]
    if problems:
        more = f" (and {len(problems) - PROBLEMS_SHOWN} more problems)" if len(problems) > PROBLEMS_SHOWN else ""
        return Finding(
            "integrity",
            False,
            "; ".join(problems[:PROBLEMS_SHOWN]) + more,
            _repairs(problems[:PROBLEMS_SHOWN], checks.store_schema(conn)),
            code="integrity_problems",
            data={"amcheck": full, "problems": problems},
        )
    if found:
        return _locked("integrity")
    if refused:
        return Finding(
            "integrity",
            True,
            f"every row of every table read whole: ok (amcheck is installed, but {conn.info.user} may not run its"
            " functions, so the indexes were not checked)",
            "run doctor as a superuser, or GRANT EXECUTE ON FUNCTION verify_heapam, bt_index_check (and"
            f" gin_index_check) TO {conn.info.user}",
            code="integrity_unchecked",
            data={"amcheck": False},
        )
    if full:
        detail = "amcheck: every table and B-tree/GIN index ok"
        return Finding("integrity", True, detail, code="integrity_ok", data={"amcheck": True})
    return Finding(
        "integrity",
        True,
        "every row of every table read whole: ok (amcheck is not installed in this database, so the indexes"
        " were not checked)",
        "for the full check, once as a superuser in this database: CREATE EXTENSION amcheck",
        code="integrity_ok_rows_only",
        data={"amcheck": False},
    )


def _repairs(problems: list[str], schema: str) -> str:
    """What repairs what was found: an index is rebuilt (or a rebuild's leftover copy dropped); a damaged
    table is the server's to explain (its logs) and a backup's to restore."""
    fixes: list[str] = []
    for problem in problems:
        kind, _, rest = problem.partition(" ")
        name = rest.split(":", 1)[0]
        qualified = name if "." in name else f"{schema}.{name}"
        if kind == "index" and name.endswith("_ccnew"):
            fixes.append(f"DROP INDEX CONCURRENTLY {qualified}")
        elif kind == "index":
            fixes.append(f"REINDEX INDEX CONCURRENTLY {qualified}")
        else:
            fixes.append(f"{LOGS_FIX} about {qualified}, and restore it from a backup")
    return "; ".join(dict.fromkeys(fixes))


# -- the password never shows --------------------------------------------------------------------------------


def shown_url(url: str) -> str:
    """The URL as a report may show it: no password, neither in the user part nor as a ``password`` parameter."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if parts.password is not None:
        netloc = f"{parts.username or ''}:***@{netloc.rsplit('@', 1)[1]}"
    query = _PASSWORD_PARAMETER.sub(r"\1password=***", parts.query)  # the other parameters as written
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def scrubbed(text: str, url: str) -> str:
    """``text`` with the URL's password taken out, in each spelling it may have (as written, decoded)."""
    for secret in _passwords(url):
        text = text.replace(secret, "***")
    return text


def _passwords(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [value for key, value in parse_qsl(parts.query, keep_blank_values=True) if key == "password"]
    if parts.password is not None:
        found += [parts.password, unquote(parts.password)]
    written = re.search(r"://[^/@]*?:([^@/]*)@", url)
    if written is not None:
        found.append(written.group(1))
    return sorted({secret for secret in found if secret}, key=len, reverse=True)


def _lines(exc: Exception) -> str:
    """The driver's message on one line (libpq's may add a hint on a second)."""
    return " ".join(line.strip() for line in str(exc).strip().splitlines() if line.strip()) or type(exc).__name__
