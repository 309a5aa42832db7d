"""``migrate-store --to URL|FILE``: copy the whole store into PostgreSQL, or into a SQLite file, and check the copy.

The copy is ``store/copy.py``: the source's export (one snapshot) read into the target, records first, then
the messages in id order, so a copy cut short (Ctrl-C, a lost connection, a full disk) is finished by running
the same command again; then both ends' row counts and per-kind SHA-256 of their export lines are compared.
Here: where the two stores are, what is refused before anything is written, the progress, the summary and
what to set next.

Refused with exit 2, before the target is written to:
- a target that is the source (the same file by device and inode, or the same schema of the same database
  on the same server, asked of the server, so two spellings of one URL are still caught);
- a source served by a running sidecar (the ``store_access`` identity check on the configured port, which
  names the file, or the server, database and schema): its writes during the copy would make the check fail,
  and after the switch its later turns would be missing. Sidecars on other ports or hosts writing to a
  PostgreSQL source cannot be asked; the output says to stop them, and a write during the copy shows as a
  failed check naming the tables that changed (exit 1);
- a target file or schema holding something other than an openclaw-lossless store;
- a target store holding history that is not a copy of this source cut short (``copy_store``).
A target store of an older version is brought to this version's schema first, as its sidecar would.

A password in a URL is used but never shown: messages, the summary and the next steps name the URL without
it (and any text an error echoes has it replaced), and the next steps say where to keep it instead.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

from tqdm import tqdm

from openclaw_lossless.cli.common import EXIT_OK, add_command, emit, settings_of
from openclaw_lossless.cli.store_access import base_url, running_sidecar
from openclaw_lossless.config import DATABASE_URL_SCHEMES, Settings
from openclaw_lossless.errors import BadRequest, LosslessError, NotFound

if TYPE_CHECKING:  # the store's modules load when the command runs, not with every command's parser
    from openclaw_lossless.capture.records import CaptureOptions
    from openclaw_lossless.store import copy
    from openclaw_lossless.store.backend import Place, Store

CONNECT_TIMEOUT_S = 15  # the first look at a server: a wrong host or password is said at once
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # as the database_schema setting takes it
State = Literal["absent", "store", "foreign"]
COPY_CONNECTIONS = 4  # one thread copies: two writers, two readers are plenty
_STAGES = {
    "export": "reading the source (one snapshot)",
    "records": "copying sessions, turns, compactions, snapshots, links and tombstones",
    "messages": "copying messages",
    "verify": "checking the copy: row counts and checksums of both stores",
}


def register(commands: Any) -> None:
    """The ``migrate-store`` command and its flags (the source is the store the usual flags name)."""
    parser = add_command(
        commands,
        "migrate-store",
        cmd_migrate_store,
        "copy the whole store into PostgreSQL or a SQLite file (resumable, verified by counts and checksums)",
    )
    parser.add_argument(
        "--to",
        required=True,
        metavar="URL|FILE",
        help="the target: postgresql://user@host/db (password in PGPASSWORD or ~/.pgpass: a flag shows in the"
        " process list) or a SQLite file; empty, or what an interrupted copy of this store left",
    )
    parser.add_argument("--to-schema", help="the target's PostgreSQL schema (default lossless)")
    parser.add_argument(
        "--spool-dir",
        type=Path,
        help="where the source's export is kept during the copy (default: the system's temporary folder);"
        " needs about an export's size",
    )


@dataclass(frozen=True)
class End:
    """One end of the copy: where it is, how it is shown (never with a password), its secret if any."""

    place: Place
    shown: str
    secret: str | None = None

    @property
    def is_postgres(self) -> bool:
        return self.place.url is not None


def cmd_migrate_store(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    source, target = _source(settings), _target(args, settings)
    secrets = [s for s in (source.secret, target.secret) if s]
    try:
        return _migrate(args, settings, source, target)
    except LosslessError as exc:
        exc.message = _scrubbed(exc.message, secrets)
        raise
    except Exception as exc:  # a driver's error (a malformed URL, a refused login): one line, no password
        if type(exc).__module__.split(".")[0] != "psycopg":
            raise
        where = target.shown if target.is_postgres else source.shown
        raise LosslessError(f"{where}: {_scrubbed(str(exc), secrets)}") from None


def _migrate(args: argparse.Namespace, settings: Settings, source: End, target: End) -> int:
    started = time.monotonic()
    _refuse(settings, source, target)
    if source.is_postgres and not args.json:
        print(
            "openclaw-lossless: copying from PostgreSQL: stop every sidecar writing to it (on every host) first;"
            " a write during the copy makes the check fail",
            file=sys.stderr,
        )
    from openclaw_lossless.store import copy

    with _opened(source.place) as source_store, _opened(target.place) as target_store:
        from_side = copy.Side(source_store.db, source_store.ops.transfer)
        to_side = copy.Side(target_store.db, target_store.ops.transfer)
        options = _capture_options(settings)
        try:
            report = _copy(from_side, to_side, options, args)
        except copy.CopyMismatch as exc:
            _explain_mismatch(exc.report)
            raise
    data = _summary(report, source, target, time.monotonic() - started)
    emit(data, args.json, _readable)
    return EXIT_OK


def _refuse(settings: Settings, source: End, target: End) -> None:
    """Every refusal that needs no write: a live or missing source, a target that is the source or not a store."""
    _refuse_live_source(settings, source)
    if _state(source) != "store":
        where = " (LOSSLESS_DATABASE_SCHEMA names its schema)" if source.is_postgres else ""
        raise NotFound(
            f"no store at {source.shown}: name the source with --state-dir, --db-path or --database-url{where}"
        )
    _refuse_same(source, target)
    if _state(target) == "foreign":
        raise BadRequest(
            f"{target.shown} holds something that is not an openclaw-lossless store: name an empty file or schema"
        )


def _copy(source: copy.Side, target: copy.Side, options: CaptureOptions, args: argparse.Namespace) -> copy.CopyReport:
    """``copy_store`` with a bar over the source's messages (a resumed copy starts where the target is)."""
    from openclaw_lossless.store import copy

    total = copy.count(source, "messages")
    already = copy.count(target, "messages")
    with tqdm(total=total, initial=already, desc="migrate", unit="msg", disable=None, file=sys.stderr) as bar:
        done = [0]

        def progress(copied: int) -> None:
            bar.update(copied - done[0])
            done[0] = copied

        def stage(name: str) -> None:
            if bar.disable:  # no bar (not a terminal): a line per step says what a long copy is doing
                if not args.json:
                    print(f"openclaw-lossless: {_STAGES.get(name, name)}", file=sys.stderr)
            else:
                bar.set_postfix_str(name)

        return copy.copy_store(
            source, target, options, chunk=copy.CHUNK, progress=progress, spool_dir=args.spool_dir, stage=stage
        )


def _capture_options(settings: Settings) -> CaptureOptions:
    """The capture options a sidecar with these settings uses: the import captures each message as it would."""
    from openclaw_lossless.capture.injected import InjectedText
    from openclaw_lossless.capture.records import CaptureOptions
    from openclaw_lossless.capture.redact import build_redactor

    return CaptureOptions(
        redactor=build_redactor(settings.redact_patterns),
        redact_originals=settings.redact_originals,
        include_thinking=settings.include_thinking,
        injected=InjectedText.from_entries(settings.injected_blocks),
    )


def _explain_mismatch(report: copy.CopyReport) -> None:
    changed = report.source_changed()
    if changed:
        print(
            f"openclaw-lossless: the source changed while it was copied ({', '.join(changed)}): a sidecar still"
            " writes to it. Stop every sidecar on it, then run the same command again: it copies what is new",
            file=sys.stderr,
        )


# -- the two ends ---------------------------------------------------------------------------------------------


def _source(settings: Settings) -> End:
    from openclaw_lossless.store.backend import Place

    if settings.database_url is None:
        path = settings.database_path
        return End(Place(path, synchronous=settings.synchronous), str(path))
    url = settings.database_url.get_secret_value()
    place = Place(settings.database_path, url=url, schema=settings.database_schema, connections=COPY_CONNECTIONS)
    return End(place, _shown_url(url, settings.database_schema), _password(url))


def _target(args: argparse.Namespace, settings: Settings) -> End:
    """The ``--to`` target: a PostgreSQL URL (``--to-schema``, default ``lossless``) or a SQLite file."""
    from openclaw_lossless.store.backend import Place

    to: str = args.to.strip()
    if to.startswith(DATABASE_URL_SCHEMES):
        schema = args.to_schema or "lossless"
        _check_schema(schema)
        place = Place(settings.database_path, url=to, schema=schema, connections=COPY_CONNECTIONS)
        return End(place, _shown_url(to, schema), _password(to))
    if "://" in to:
        raise BadRequest("--to is a postgresql:// URL or a SQLite file path")
    if args.to_schema is not None:
        raise BadRequest("--to-schema names a PostgreSQL schema: it goes with a postgresql:// --to only")
    path = Path(to).expanduser().absolute()
    if path.is_dir():
        raise BadRequest(f"--to {path} is a folder: name the SQLite file to create, e.g. {path / 'lossless.sqlite'}")
    return End(Place(path, synchronous=settings.synchronous), str(path))


def _check_schema(schema: str) -> None:
    if not SCHEMA_NAME.fullmatch(schema):
        raise BadRequest(f"--to-schema {schema!r}: a schema name is lower-case letters, digits and '_' (at most 63)")


def _refuse_live_source(settings: Settings, source: End) -> None:
    """A sidecar serving the source on the configured port would keep writing to it during and after the copy."""
    client = running_sidecar(settings)
    if client is None:
        return
    client.close()
    raise BadRequest(
        f"a sidecar is serving {source.shown} on {base_url(settings)}: stop it first (and the OpenClaw gateway,"
        " whose plugin would start it again), then run migrate-store again"
    )


def _refuse_same(source: End, target: End) -> None:
    if source.is_postgres != target.is_postgres:
        return
    if not source.is_postgres:
        same = target.place.path.exists() and os.path.samefile(source.place.path, target.place.path)
    else:
        same = _server_identity(source) == _server_identity(target) and source.place.schema == target.place.schema
    if same:
        raise BadRequest(f"--to names the source itself ({target.shown}): name another file, database or schema")


def _state(end: End) -> State:
    """``absent`` (nothing there yet), ``store`` (an openclaw-lossless store) or ``foreign`` (something else).

    Only read: a refused target is never created or changed.
    """
    if end.is_postgres:
        return _postgres_state(end)
    path = end.place.path
    if not path.exists() or path.stat().st_size == 0:
        return "absent"
    from openclaw_lossless.store.sqlite.checks import table_names
    from openclaw_lossless.store.sqlite.connection import open_connection, sqlite_module

    try:
        conn = open_connection(path, readonly=True)
    except LosslessError:
        return "foreign"
    try:
        names = table_names(conn)
    except sqlite_module().DatabaseError:
        return "foreign"
    finally:
        conn.close()
    return "store" if "migrations" in names else ("foreign" if names else "absent")


def _postgres_state(end: End) -> State:
    from openclaw_lossless.store.postgres.checks import relation_count
    from openclaw_lossless.store.postgres.migrations import applied_names

    with _server(end) as conn:
        if applied_names(conn, end.place.schema) is not None:
            return "store"
        found = relation_count(conn, end.place.schema)
    return "foreign" if found > 0 else "absent"


def _server_identity(end: End) -> tuple[str, int]:
    """Which database of which running server the URL reaches: the server's start time and the database's oid."""
    from openclaw_lossless.store.postgres.checks import server_identity

    with _server(end) as conn:
        return server_identity(conn)


@contextmanager
def _server(end: End) -> Iterator[Any]:
    """One plain connection for a look (no pool, nothing written)."""
    import psycopg

    from openclaw_lossless.store.postgres.connection import translate_error

    assert end.place.url is not None
    try:
        conn = psycopg.connect(end.place.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        error = translate_error(exc)
        raise (error if isinstance(error, LosslessError) else LosslessError(str(exc))) from exc
    with conn:
        yield conn


@contextmanager
def _opened(place: Place) -> Iterator[Store]:
    from openclaw_lossless.store.backend import connect

    store = connect(place)
    try:
        yield store
    finally:
        store.db.close()


# -- what is shown --------------------------------------------------------------------------------------------


def _password(url: str) -> str | None:
    parts = urlsplit(url)
    from_query = dict(parse_qsl(parts.query)).get("password")
    return parts.password or from_query or None


def without_password(url: str) -> str:
    """The URL with its password left out (of the user part and of a ``password=`` parameter)."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}@{host}" if user.split(":", 1)[0] else host
    query = "&".join(item for item in parts.query.split("&") if item.split("=", 1)[0] != "password")
    return urlunsplit(parts._replace(netloc=netloc, query=query))


def _shown_url(url: str, schema: str) -> str:
    return f"{without_password(url)} (schema {schema})"


def _scrubbed(text: str, secrets: list[str]) -> str:
    """``text`` with each secret replaced, as written in the URL and percent-decoded."""
    for secret in secrets:
        for form in {secret, unquote(secret)}:
            text = text.replace(form, "***")
    return text


def _summary(report: copy.CopyReport, source: End, target: End, seconds: float) -> dict[str, Any]:
    assert report.target is not None
    return {
        "source": source.shown,
        "target": target.shown,
        "resumedAfter": report.resumed_after,
        "copied": _copied(report),
        "rows": report.target.rows,
        "checksums": report.target.checksums,
        "verified": True,
        "seconds": round(seconds, 2),
        "vectors": "not copied: the target's sidecar embeds every copied message again (its backlog)",
        "next": _next(target),
    }


def _copied(report: copy.CopyReport) -> dict[str, int]:
    """What this run added to the target (a resumed run: only what the earlier one had not)."""
    records, messages = report.records, report.messages
    return {
        "messages": messages.imported,
        "sessions": records.sessions,
        "turns": records.turns,
        "compactions": records.compactions,
        "snapshots": records.snapshots,
        "subagentLinks": records.subagent_links,
        "tombstones": records.tombstones,
        "alreadyPresent": records.already_present + messages.already_present,
    }


def _next(target: End) -> dict[str, str | None]:
    """What to set so the sidecar uses the target: without the password, which stays where the user keeps it."""
    if target.is_postgres:
        assert target.place.url is not None
        return {
            "LOSSLESS_DATABASE_URL": without_password(target.place.url),
            "LOSSLESS_DATABASE_SCHEMA": target.place.schema,
        }
    return {"LOSSLESS_DATABASE_URL": None, "LOSSLESS_DB_PATH": str(target.place.path)}


def _readable(data: dict[str, Any]) -> str:
    rows = data["rows"]
    counts = ", ".join(f"{n} {table.replace('_', ' ')}" for table, n in rows.items())
    resumed = f" (resumed after message {data['resumedAfter']})" if data["resumedAfter"] else ""
    if data["resumedAfter"] and not data["copied"]["messages"]:
        resumed = " (the target already held every message: checked again)"
    settings = data["next"]
    if settings.get("LOSSLESS_DATABASE_URL"):
        step = (
            f"set LOSSLESS_DATABASE_URL={shlex.quote(settings['LOSSLESS_DATABASE_URL'])}"
            f" LOSSLESS_DATABASE_SCHEMA={settings['LOSSLESS_DATABASE_SCHEMA']}"
            " (the password: PGPASSWORD or ~/.pgpass, not the URL)"
        )
    else:
        step = f"unset LOSSLESS_DATABASE_URL and set LOSSLESS_DB_PATH={shlex.quote(settings['LOSSLESS_DB_PATH'])}"
    lines = [
        f"copied {data['source']} -> {data['target']}{resumed}: {data['copied']['messages']} messages in"
        f" {data['seconds']} s",
        f"the target holds {counts}",
        f"verified: row counts of {len(rows)} tables and SHA-256 of every kind of export line match the source",
        "vectors are not copied: the target's sidecar embeds its backlog of copied messages in the background"
        " (recall uses keyword search until then)",
        f"next: {step}, restart the sidecar (or the OpenClaw gateway), then check with `openclaw-lossless stats`."
        " The source is left as it was.",
    ]
    return "\n".join(lines)
