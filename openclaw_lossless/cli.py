"""The command line: ``openclaw-lossless <command>`` (also ``python -m openclaw_lossless``).

Queries (search, pack, recover, stats) go to the running sidecar when it answers on its port (warm model,
warm index) and open the database file directly when it does not. Writes (snapshot, import, prune,
reindex) always go to the file: SQLite's locking makes that safe next to a running sidecar, whose worker
then embeds whatever was queued. Exit codes: 0 success, 1 a failure of the store or embedder (or a doctor
finding), 2 bad input (including a session, snapshot or compaction that does not exist, and usage errors);
errors are one line on stderr, never a traceback. Numbers are checked while parsing, so a query answers bad input
the same way whether it reaches the sidecar or the file.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import math
import os
import re
import sqlite3
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
from pydantic import ValidationError
from tqdm import tqdm

from openclaw_lossless import __version__, readable
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest, LosslessError, NotFound
from openclaw_lossless.store.connection import translate_error
from openclaw_lossless.store_access import (
    answer,
    base_url,
    open_file_store,
    query,
    read_token,
    running_sidecar,
    serves_this_store,
    sidecar_or_file,
)

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
# The most hits /v1/search returns (its bound on k): a --role/--since/--until filter picks from this many.
SEARCH_CEILING = 200
_SURROGATE = re.compile("[\ud800-\udfff]")
Handler = Callable[[argparse.Namespace], int]


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("host", "port", "state_dir", "db_path", "model_dir", "embedding_provider", "metrics_port"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    if getattr(args, "allow_remote", False):
        overrides["allow_remote"] = True
    return Settings(**overrides)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _query(settings: Settings, path: str, params: dict[str, Any], local: Callable[[Any], Any]) -> Any:
    return query(settings, path, params, local)[1]


def _emit(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    text = json.dumps(data, indent=2, default=str, ensure_ascii=False) if as_json else human(data)
    if _SURROGATE.search(text):  # a lone surrogate (legal in JavaScript strings) cannot be printed as UTF-8
        text = json.dumps(data, indent=2, default=str) if as_json else _SURROGATE.sub("\ufffd", text)
    print(text)


# -- serve, model -------------------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    from openclaw_lossless.app import create_app, server_config

    settings = _settings(args)
    if not is_loopback(settings.host) and not settings.allow_remote:
        raise BadRequest(f"refusing to listen on {settings.host}: it is not loopback; pass --allow-remote to mean it")
    os.umask(0o077)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from openclaw_lossless import listeners, prometheus
    from openclaw_lossless.sidecar import Sidecar

    try:
        tcp = listeners.bind_tcp(settings.host, settings.port)
    except OSError as exc:
        if not listeners.port_in_use(exc):
            raise
        return _port_taken(settings, args.json)
    unix = listeners.bind_unix(settings.state_dir)
    metrics = prometheus.MetricsListener([])
    # Opened here, not in the app's lifespan, so a damaged or too-new database is one line and exit 1,
    # not a traceback from inside the server. The vector index loads in the background, as in the app.
    try:
        metrics = prometheus.bind_metrics_port(settings)  # --metrics-port: /metrics there without the token
        sidecar = Sidecar(settings, background_load=True)
        try:
            app = create_app(settings, sidecar=sidecar)
            metrics.attach(app)
            where = f"http://{settings.host}:{tcp[0].getsockname()[1]}" + (f" and {unix.path}" if unix else "")
            logging.getLogger("openclaw_lossless.serve").info("serving %s on %s", settings.state_dir, where)
            if args.json:  # one line a supervisor can read; logs go to stderr
                started = {"status": "serving", "url": where.split(" and ")[0], "socket": unix and str(unix.path),
                           "pid": os.getpid(), "stateDir": str(settings.state_dir)}  # fmt: skip
                print(json.dumps(started), flush=True)
            sockets = [*tcp, *([unix.sock] if unix else []), *metrics.sockets]
            config = server_config(app, settings, log_level=args.log_level)
            listeners.Server(config, unix).run(sockets=sockets)
        finally:
            sidecar.close()
    finally:
        metrics.close()
        for sock in tcp:
            sock.close()
        if unix:
            unix.remove()
    return EXIT_OK


def _port_taken(settings: Settings, as_json: bool) -> int:
    """``serve`` when the port is in use: exit 0 if this store's own sidecar holds it (nothing to do), else 1.

    Nothing has been opened yet (no database, no model): only the token is read, to check the holder's proof.
    """
    from openclaw_lossless import listeners
    from openclaw_lossless.api.identity import store_id

    url = base_url(settings)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one answer line, not the probe's request log
    peer = listeners.who_serves(url, read_token(settings))
    if peer is not None and peer["ours"] and peer.get("store") == store_id(settings.database_path):
        pid = peer.get("pid")
        plugin = _plugin_owns(settings, pid)
        owner = "started by the OpenClaw plugin, which restarts it if it stops" if plugin else "running"
        data = {"status": "alreadyServing", "url": url, "pid": pid, "stateDir": str(settings.state_dir),
                "startedByPlugin": plugin}  # fmt: skip
        _emit(data, as_json, lambda _: (
            f"openclaw-lossless: already serving {settings.state_dir} on {url} (pid {pid}, {owner}); nothing to do."
            f" To run it in this terminal instead, stop that one first (kill {pid}) and set the plugin's autoStart"
            " to false."
        ))  # fmt: skip
        return EXIT_OK
    if peer is None:
        holder = "another program"
    elif peer["ours"]:
        holder = f"this state dir's sidecar (pid {peer.get('pid')}) serving another database file"
    else:
        holder = f"another openclaw-lossless sidecar (pid {peer.get('pid')}) with a different state dir"
    print(
        f"openclaw-lossless: port {settings.port} on {settings.host} is held by {holder};"
        " stop it, or pass --port (and set the plugin's sidecarUrl to match)",
        file=sys.stderr,
    )
    if as_json:
        _emit({"status": "portTaken", "url": url, "pid": None if peer is None else peer.get("pid")}, True, str)
    return EXIT_FAILURE


def _plugin_owns(settings: Settings, pid: object) -> bool:
    """Whether ``<state_dir>/sidecar.owner`` (written by the plugin when it spawns a sidecar) names ``pid``."""
    try:
        return bool(json.loads((settings.state_dir / "sidecar.owner").read_text()).get("pid") == pid)
    except (OSError, ValueError, AttributeError):
        return False


def cmd_mcp(args: argparse.Namespace) -> int:
    from openclaw_lossless import mcp_server

    settings = _settings(args)
    if args.json:  # stdout is the MCP stream: the start-up line goes to stderr
        start = {"status": "serving", "transport": "stdio", "database": str(settings.database_path),
                 "sidecar": base_url(settings) if serves_this_store(settings) else None}  # fmt: skip
        print(json.dumps(start), file=sys.stderr, flush=True)
    mcp_server.run(settings)
    return EXIT_OK


def cmd_model_fetch(args: argparse.Namespace) -> int:
    from openclaw_lossless.embed.model_files import fetch_model

    path = fetch_model(_settings(args).model_dir, progress=lambda line: print(line, file=sys.stderr))
    _emit({"ready": True, "path": str(path)}, args.json, lambda d: f"model ready in {d['path']}")
    return EXIT_OK


# -- queries ------------------------------------------------------------------------------------------------


def _scope(args: argparse.Namespace) -> str:
    if args.session:
        return f"session:{args.session}"
    return f"agent:{args.agent}" if args.agent else "all"


def cmd_search(args: argparse.Namespace) -> int:
    """Search, then apply --role/--since/--until to the hits.

    The search API takes no such filters, so they pick from the most hits it returns (SEARCH_CEILING, itself
    drawn from each lane's best); when that pool may have been cut off and the filters leave fewer than -k,
    a note on stderr says so rather than letting an older match go silently missing.
    """
    settings = _settings(args)
    filtered = _filtered(args)
    params = {"q": args.query, "scope": _scope(args), "k": SEARCH_CEILING if filtered else args.k, "mode": args.mode}
    data = _query(
        settings,
        "/v1/search",
        params,
        lambda s: {"hits": s.search(args.query, params["scope"], params["k"], args.mode)},
    )
    hits = [h for h in data["hits"] if _keep(h, args)][: args.k]
    if filtered and len(hits) < args.k and _pool_may_be_cut(len(data["hits"])):
        print(
            f"openclaw-lossless: note: --role/--since/--until chose from the best {len(data['hits'])} hits only;"
            " narrow the query, --agent or --session to reach older matches",
            file=sys.stderr,
        )
    _emit({"query": args.query, "hits": hits}, args.json, readable.hits)
    return EXIT_OK


def _filtered(args: argparse.Namespace) -> bool:
    return bool(args.role) or args.since is not None or args.until is not None


def _pool_may_be_cut(found: int) -> bool:
    """Whether a lane may have stopped at its depth, so matches beyond the hits returned can exist."""
    from openclaw_lossless.recall.assemble import LANE_DEPTH

    return found >= min(LANE_DEPTH, SEARCH_CEILING)


def _keep(hit: dict[str, Any], args: argparse.Namespace) -> bool:
    """A hit that matches the filters and the query at all: a score of 0 is no match in any lane."""
    if isinstance(hit.get("score"), int | float) and hit["score"] <= 0:
        return False
    if args.role and hit["role"] != args.role:
        return False
    if args.since is not None and hit["createdAt"] < args.since:
        return False
    return not (args.until is not None and hit["createdAt"] > args.until)


def cmd_pack(args: argparse.Namespace) -> int:
    settings = _settings(args)
    params = {"q": args.query, "budgetTokens": args.budget_tokens, "scope": _scope(args), "k": args.k}
    data = _query(
        settings, "/v1/pack", params, lambda s: s.pack(args.query, args.budget_tokens, params["scope"], args.k)
    )
    if not args.trace:
        data.pop("trace", None)
    _emit(data, args.json, readable.pack)
    return EXIT_OK


def cmd_recover(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with open_file_store(settings) as sidecar:
        session, up_to = args.session, None
        if args.snapshot:
            snap = sidecar.snapshot(args.snapshot)
            session, up_to = snap["sessionId"], snap["lastMessageId"]
        elif args.before_compaction is not None:
            point = sidecar.compaction(args.before_compaction)
            session, up_to = point["sessionId"], point["lastMessageId"]
        data = sidecar.recover(session, args.last, up_to)
    _emit(data, args.json, readable.conversation)
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    settings = _settings(args)
    data = _query(settings, "/stats", {}, lambda s: s.stats())
    _emit(data, args.json, readable.stats)
    return EXIT_OK


# -- snapshots ----------------------------------------------------------------------------------------------


def cmd_snapshot(args: argparse.Namespace) -> int:
    with open_file_store(_settings(args)) as sidecar:
        if args.snapshot_command == "create":
            data: Any = sidecar.snapshot_create(args.name, args.session)
            human: Callable[[Any], str] = lambda d: f"snapshot {d['name']} -> msg:{d['lastMessageId']}"  # noqa: E731
        elif args.snapshot_command == "list":
            data = {"snapshots": sidecar.snapshots()}
            human = readable.snapshots
        else:
            snap = sidecar.snapshot(args.name)
            recovered = sidecar.recover(snap["sessionId"], args.last, snap["lastMessageId"])
            data = snap | {"agentId": recovered["agentId"], "messages": recovered["messages"]}
            human = readable.snapshot
    _emit(data, args.json, human)
    return EXIT_OK


# -- export, import -----------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    from openclaw_lossless.store.transfer import ExportScope, check_scope, export_store, write_jsonl

    to_file = args.output not in (None, "-")
    exists = to_file and os.path.lexists(args.output) and not os.path.isdir(args.output)  # a directory: exit 1
    if exists and not args.force:  # checked before the store is opened
        raise BadRequest(f"{args.output} already exists; export does not overwrite it without --force")
    with open_file_store(_settings(args)) as sidecar:
        scope = ExportScope(args.agent, args.session)
        check_scope(sidecar.db.reader(), scope)  # before the output file is created or truncated
        records = export_store(sidecar.db.reader(), scope)
        if not to_file:
            counts = write_jsonl(records, sys.stdout)
        else:
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if args.force else os.O_EXCL)
            fd = os.open(args.output, flags, 0o600)
            os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that already exists
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                counts = write_jsonl(tqdm(records, desc="export", unit="line", disable=None), out)
    if args.json:  # on stdout unless the JSONL itself is there
        data = {"output": args.output if to_file else None} | {f"{kind}s": counts[kind] for kind in _EXPORTED}
        print(json.dumps(data), file=sys.stdout if to_file else sys.stderr)
    else:
        print("exported " + ", ".join(f"{counts[k]} {label}" for k, label in _EXPORTED.items()), file=sys.stderr)
    return EXIT_OK


_EXPORTED = {"message": "messages", "session": "sessions", "turn": "turns", "compaction": "compactions",
             "snapshot": "snapshots", "subagentLink": "subagent links"}  # fmt: skip


def cmd_import(args: argparse.Namespace) -> int:
    if not args.jsonl:
        return _import_openclaw(args)
    settings = _settings(args)
    with open_file_store(settings) as sidecar:
        from openclaw_lossless.store.transfer import import_jsonl

        with tqdm(desc="import", unit="msg", disable=None, file=sys.stderr) as bar:
            report: Any = import_jsonl(sidecar.db, Path(args.jsonl), sidecar.capture_options, bar.update)
        data = vars(report)
    _emit(
        data,
        args.json,
        lambda d: ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in d.items() if not isinstance(v, list | dict)),
    )
    return EXIT_OK


def _import_openclaw(args: argparse.Namespace) -> int:
    """Import OpenClaw's history; a source that could not be read is named with its reason and makes it exit 1.

    The other sources are still imported (one damaged agent database must not hold back the rest), so the
    counts are printed either way; the exit code is what tells a script that something was left behind.
    """
    from dataclasses import asdict

    from openclaw_lossless.config import openclaw_state_dir
    from openclaw_lossless.history import import_history

    source = Path(args.openclaw_state) if args.openclaw_state else openclaw_state_dir()
    with (
        open_file_store(_settings(args)) as sidecar,
        tqdm(desc="import", unit="msg", disable=None, file=sys.stderr) as bar,
    ):
        report = import_history(
            sidecar,
            source,
            agent=args.agent,
            session_id=args.session,
            progress=lambda done, total: bar.update(done - bar.n),
        )
    for detail in report.details:
        if detail.error is not None:
            print(f"openclaw-lossless: {detail.error}", file=sys.stderr)
    _emit(asdict(report), args.json, readable.counts)
    return EXIT_FAILURE if report.errors else EXIT_OK


# -- forget -------------------------------------------------------------------------------------------------


def cmd_forget(args: argparse.Namespace) -> int:
    """Show what the selection names (always), then forget it after a confirmation (``--yes`` for scripts)."""
    settings = _settings(args)
    body: dict[str, Any] = {
        "ids": args.citations,
        "sessionId": args.session,
        "agentId": args.agent,
        "since": args.since,
        "until": args.until,
        "match": args.match,
        "all": args.all,
    }
    found = _forget(settings, body | {"dryRun": True})
    if args.dry_run or not args.yes:
        _emit(found, args.json, readable.forget)
    if args.dry_run:
        return EXIT_OK
    if not args.yes and not _confirmed(found["forgotten"]):
        print("openclaw-lossless: nothing was forgotten", file=sys.stderr)
        return EXIT_USAGE
    done = _forget(settings, body | {"dryRun": False})
    _emit(done, args.json, readable.forget)
    return EXIT_OK


def _forget(settings: Settings, body: dict[str, Any]) -> Any:
    """Through the running sidecar when it serves this store (its vector index forgets too), else the file."""

    def on_file() -> Any:
        from openclaw_lossless.api.forget import ForgetRequest
        from openclaw_lossless.store import forget

        request = ForgetRequest.model_validate(body)
        with open_file_store(settings) as sidecar:
            return forget.run(
                sidecar.db, sidecar.index, settings.archive_dir, request.selector(), dry_run=request.dry_run
            )

    return sidecar_or_file(settings, lambda client: client.post("/v1/forget", json=body), on_file)[1]


def _confirmed(count: int) -> bool:
    if not sys.stdin.isatty():
        raise BadRequest("not a terminal: add --yes to forget without a confirmation, or --dry-run to only look")
    answer = input(f"Forget these {count} messages for good? This cannot be undone. [y/N] ")
    return answer.strip().lower() in ("y", "yes")


# -- maintenance --------------------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    from openclaw_lossless import doctor

    openclaw_state = Path(args.openclaw_state) if args.openclaw_state else None
    findings = doctor.run(_settings(args), profile=args.profile, openclaw_state=openclaw_state)
    data = {"ok": all(f.ok for f in findings), "findings": [f.view() for f in findings]}

    _emit(data, args.json, readable.findings)
    return EXIT_OK if data["ok"] else EXIT_FAILURE


def cmd_salvage(args: argparse.Namespace) -> int:
    from openclaw_lossless import salvage

    source = _settings(args).database_path
    out = Path(args.out) if args.out else salvage.default_output(source)
    with tqdm(desc="salvage", unit="page", disable=None, file=sys.stderr) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        data = salvage.salvage(source, out, progress)

    def human(d: dict[str, Any]) -> str:
        counts = ", ".join(f"{n} {t}" for t, n in d["recovered"].items() if n)
        verdict = (
            "everything was readable"
            if d["complete"]
            else (
                f"the source was damaged: about {d['messagesMissing']} messages could not be read"
                f" ({d['damagedPages']} damaged pages, {d['unreadableRows']} unreadable rows)"
            )
        )
        return f"salvaged into {d['out']}: {counts}\n{verdict}\nnext: {d['next']}"

    _emit(data, args.json, human)
    return EXIT_OK if data["complete"] else EXIT_FAILURE


def cmd_prune(args: argparse.Namespace) -> int:
    from openclaw_lossless.store import archive

    settings = _settings(args)
    limit = settings.max_db_size_mb if args.max_db_size_mb is None else args.max_db_size_mb
    with (
        open_file_store(settings) as sidecar,
        tqdm(desc="archive", unit="msg", disable=None, file=sys.stderr) as bar,
    ):
        data = archive.prune(sidecar.db, settings.archive_dir, limit, dry_run=args.dry_run, progress=bar.update)
    verb = "would archive" if args.dry_run else "archived"
    _emit(data, args.json, lambda d: f"{verb} {d['pruned']} messages (limit {limit} MB)")
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace) -> int:
    from openclaw_lossless import reindex

    settings = _settings(args)
    want_fts, want_vectors = args.fts or not args.vectors, args.vectors or not args.fts
    data: dict[str, Any] = {}
    if want_fts:
        with open_file_store(settings) as sidecar:
            data["fts"] = reindex.rebuild_fts(sidecar.db, progress_file=sys.stderr)
    if want_vectors:
        running = serves_this_store(settings)
        with open_file_store(settings, embeddings=not running) as sidecar:
            data["vectors"] = reindex.rebuild_vectors(
                sidecar, missing_only=args.missing, drain=not running, progress_file=sys.stderr
            )
    _emit(data, args.json, lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()))
    return EXIT_OK


def cmd_redact(args: argparse.Namespace) -> int:
    """``redact --rescan``: through the running sidecar when it serves this store, else on the file."""
    if not args.rescan:
        raise BadRequest("redact needs --rescan (apply the current rules to what is stored; add --dry-run to look)")
    settings = _settings(args)
    client = running_sidecar(settings)
    if client is not None:
        with client:
            data = answer(client.post("/v1/redact/rescan", json={"dryRun": args.dry_run}, timeout=None))
    else:
        from openclaw_lossless.rescan import rescan_store

        bars: dict[str, tqdm[Any]] = {}

        def progress(place: str, done: int) -> None:
            if place not in bars:
                bars[place] = tqdm(desc=f"rescan {place}", unit="row", disable=None, file=sys.stderr)
            bars[place].update(done)

        try:
            with open_file_store(settings) as sidecar:
                data = rescan_store(sidecar, dry_run=args.dry_run, progress=progress)
        finally:
            for bar in bars.values():
                bar.close()
    _emit(data, args.json, readable.rescan)
    return EXIT_OK


# -- wiring -------------------------------------------------------------------------------------------------


def _common(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument("--state-dir", type=Path, help="where the database and token live")
    parser.add_argument("--db-path", type=Path, help="the database file (default: <state-dir>/lossless.sqlite)")
    parser.add_argument("--model-dir", type=Path, help="where the local embedding model is kept")
    parser.add_argument("--port", type=int, help="the running sidecar's port (default 8377)")
    if output:
        parser.add_argument("--json", action="store_true", help="machine-readable output")


def _timestamp(value: str) -> float:
    """An ISO date or time as epoch seconds: its offset is honoured; without one it is UTC, as stored times are."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date: {value!r} (use YYYY-MM-DD or an ISO time)") from exc
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()


def _until(value: str) -> float:
    """As ``_timestamp``, but a date alone means the end of that day: ``--until 2026-03-01`` includes the 1st."""
    moment = _timestamp(value)
    return moment + 86400 - 0.001 if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()) else moment


def _query_text(value: str) -> str:
    """A query as the sidecar's API takes it (1-20000 characters, here also not blank), checked on both paths."""
    if not value.strip() or len(value) > 20_000:
        raise argparse.ArgumentTypeError("a query is 1 to 20000 characters, not blank")
    return value


def _citation(value: str) -> str:
    """``msg:N`` (or N), checked while parsing."""
    if not re.fullmatch(r"(?:msg:)?[1-9][0-9]{0,17}", value.strip()):
        raise argparse.ArgumentTypeError(f"a citation is msg:N with N a whole number of 1 or more, not {value!r}")
    return value.strip()


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An integer argument type within [low, high].

    Checked while parsing, so a query refuses it the same way (exit 2) whether it would have gone to the
    sidecar, whose API bounds these, or to the file, where a negative LIMIT would mean "no limit".
    """
    bounds = f"from {low} to {high}" if high is not None else f"of {low} or more"

    def parse(value: str) -> int:
        try:
            number = int(value)
        except ValueError:
            number = low - 1
        if number < low or (high is not None and number > high):
            raise argparse.ArgumentTypeError(f"expected a whole number {bounds}, not {value!r}")
        return number

    return parse


def _megabytes(value: str) -> float:
    """A size limit in MB: 0 or more (0 means never prune, as for maxDbSizeMb)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"expected a size in MB of 0 or more (0: never prune), not {value!r}")
    return number


def _profile(value: str) -> str:
    """An OpenClaw profile name as ``openclaw --profile`` takes it (letters, digits, '_' and '-')."""
    from openclaw_lossless.doctor.host_config import PROFILE_NAME

    if not PROFILE_NAME.match(value):
        raise argparse.ArgumentTypeError(f"invalid profile {value!r}: use letters, numbers, '_' and '-' only")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line with a pointer to --help (exit 2), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _add(commands: Any, name: str, handler: Handler, help_text: str, **kw: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
    _common(parser, **kw)
    parser.set_defaults(func=handler)
    return parser


def _scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only this agent's history")
    parser.add_argument("--session", help="only this session")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="openclaw-lossless", description="A lossless context engine for OpenClaw.")
    parser.add_argument("--version", action="version", version=f"openclaw-lossless {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    serve = _add(commands, "serve", cmd_serve, "start the sidecar (what the plugin auto-starts)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument(
        "--metrics-port", type=int, help="also serve GET /metrics without the token on this loopback port"
    )
    serve.add_argument("--embedding-provider", choices=["local", "openai-compatible", "none"])
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    mcp = _add(commands, "mcp", cmd_mcp, "serve memory_search to MCP clients (Claude Code, Codex) over stdio")
    mcp.add_argument("--host", help="the running sidecar's address (default 127.0.0.1)")

    model = commands.add_parser("model", help="manage the local embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True, metavar="command")
    _add(model_commands, "fetch", cmd_model_fetch, "download and build the local model (idempotent)")

    search = _add(commands, "search", cmd_search, "hybrid search over the stored history")
    search.add_argument("query", type=_query_text, help="what to look for, in plain words")
    _scope_flags(search)
    search.add_argument("--role", help="only messages of this role (user, assistant, toolResult, ...)")
    search.add_argument(
        "--since", type=_timestamp, help="only messages from this time on: ISO date or time; no offset means UTC"
    )
    search.add_argument(
        "--until",
        type=_until,
        help="only messages up to this time, e.g. 2026-03-01 (that whole day) or 2026-03-01T12:00+02:00;"
        " no offset means UTC",
    )
    search.add_argument("--mode", choices=["hybrid", "keyword", "vector"], default="hybrid")
    search.add_argument(
        "-k", type=_whole(1, SEARCH_CEILING), default=10, help="how many hits (default 10, at most 200)"
    )

    pack = _add(commands, "pack", cmd_pack, "the bounded, cited context bundle for a query")
    pack.add_argument("--query", type=_query_text, required=True, help="what the bundle is for")
    pack.add_argument(
        "--budget-tokens",
        type=_whole(100, 1_000_000),
        default=2000,
        help="token budget of the bundle (default 2000, from 100 to 1000000)",
    )
    pack.add_argument("--trace", action="store_true", help="include every candidate's score parts and fate")
    pack.add_argument("-k", type=_whole(1, 200), help="at most this many items (default: retrievalCount)")
    _scope_flags(pack)

    recover = _add(commands, "recover", cmd_recover, "print a conversation as it was, ready to paste back")
    recover.add_argument("--last", type=_whole(1), default=50, help="how many messages (default 50)")
    recover.add_argument("--session", help="the session (default: the most recent one)")
    point = recover.add_mutually_exclusive_group()
    point.add_argument("--snapshot", help="as it was at this snapshot")
    point.add_argument("--before-compaction", type=_whole(1), metavar="N", help="as it was before compaction N")

    snapshot = commands.add_parser("snapshot", help="named checkpoints of a session (never destructive)")
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True, metavar="command")
    create = _add(snapshot_commands, "create", cmd_snapshot, "name the current end of a session")
    create.add_argument("name")
    create.add_argument("--session", help="the session (default: the most recent one)")
    _add(snapshot_commands, "list", cmd_snapshot, "list snapshots, manual and automatic")
    show = _add(snapshot_commands, "show", cmd_snapshot, "show a snapshot and the conversation up to it")
    show.add_argument("name")
    show.add_argument("--last", type=_whole(1), default=50, help="how many messages (default 50)")

    export = _add(commands, "export", cmd_export, "write messages as JSONL (whole store, an agent or a session)")
    export.add_argument("-o", "--output", help="file to write (default: standard output); never overwritten")
    export.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    _scope_flags(export)

    imp = _add(commands, "import", cmd_import, "bring in an OpenClaw installation's history, or a JSONL export")
    imp.add_argument("--jsonl", help="an export or archive file (.jsonl or .jsonl.gz) instead of OpenClaw's history")
    imp.add_argument("--openclaw-state", help="OpenClaw's state dir (default: $OPENCLAW_STATE_DIR or ~/.openclaw)")
    _scope_flags(imp)

    _add(commands, "stats", cmd_stats, "counts, sizes, backlog and latencies")
    forget = _add(commands, "forget", cmd_forget, "remove messages for good, and keep them from coming back")
    forget.add_argument("citations", nargs="*", metavar="msg:N", type=_citation, help="the messages to forget")
    _scope_flags(forget)
    forget.add_argument("--since", type=_timestamp, help="only messages from this time on (ISO; no offset: UTC)")
    forget.add_argument("--until", type=_until, help="only messages up to this time (a date alone: that whole day)")
    forget.add_argument("--match", type=_query_text, help="only messages holding every word of this query")
    forget.add_argument("--all", action="store_true", help="let a time range alone select every stored message")
    forget.add_argument("--dry-run", action="store_true", help="show exactly what would go, change nothing")
    forget.add_argument("--yes", action="store_true", help="no confirmation question (for scripts)")
    doctor = _add(commands, "doctor", cmd_doctor, "check the installation; each finding says how to fix it")
    doctor.add_argument("--profile", type=_profile, help="the gateway's OpenClaw profile (openclaw --profile)")
    doctor.add_argument("--openclaw-state", help="OpenClaw's state dir (default: $OPENCLAW_STATE_DIR or ~/.openclaw)")

    salvage = _add(
        commands,
        "salvage",
        cmd_salvage,
        "copy every readable row of a damaged database into a new file (the damaged one is only read)",
    )
    salvage.add_argument("--out", help="the new file (default: <database>-salvaged.sqlite next to it)")

    prune = _add(commands, "prune", cmd_prune, "archive the oldest messages to compressed JSONL, then remove them")
    prune.add_argument("--dry-run", action="store_true", help="say what would be archived, change nothing")
    prune.add_argument(
        "--max-db-size-mb", type=_megabytes, help="the limit to prune to (default: maxDbSizeMb; 0: never prune)"
    )

    reindex = _add(commands, "reindex", cmd_reindex, "rebuild the full-text index and/or the vectors (resumable)")
    reindex.add_argument("--fts", action="store_true", help="rebuild the full-text index")
    reindex.add_argument("--vectors", action="store_true", help="re-embed messages")
    reindex.add_argument("--missing", action="store_true", help="with --vectors: only messages without a vector")

    redact = _add(commands, "redact", cmd_redact, "apply the current redaction rules to what is already stored")
    redact.add_argument(
        "--rescan", action="store_true", help="re-redact messages, originals, summaries and archives (resumable)"
    )
    redact.add_argument(
        "--dry-run", action="store_true", help="with --rescan: report what would change, change nothing"
    )
    return parser


def _database_errors() -> tuple[type[Exception], ...]:
    """The binding's DatabaseError (sqlean's is not the stdlib's), for the process edge."""
    from openclaw_lossless.store.connection import sqlite_module

    return (sqlite3.DatabaseError, sqlite_module().DatabaseError)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except LosslessError as exc:
        # Not found (a session, snapshot or compaction) is bad input, as the sidecar's 404 is on the remote path.
        print(f"openclaw-lossless: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, BadRequest | NotFound) else EXIT_FAILURE
    except _database_errors() as exc:  # a damaged page met outside a translated path
        print(f"openclaw-lossless: {translate_error(exc)}", file=sys.stderr)
        return EXIT_FAILURE
    except ValidationError as exc:
        first = exc.errors()[0]
        print(f"openclaw-lossless: bad setting {'.'.join(map(str, first['loc']))}: {first['msg']}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, httpx.HTTPError) as exc:
        print(f"openclaw-lossless: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
