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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import httpx
from pydantic import ValidationError
from tqdm import tqdm

from openclaw_lossless import __version__
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest, LosslessError, NotFound
from openclaw_lossless.store.connection import translate_error

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


@contextmanager
def open_sidecar(settings: Settings, *, embeddings: bool = False) -> Iterator[Any]:
    """The store opened in this process (no worker); without embeddings it loads no model and no vectors."""
    from openclaw_lossless.sidecar import Sidecar

    if embeddings:
        sidecar = Sidecar(settings, start_worker=False)
    else:
        # Keyword-only is this command's choice, not a fault: the embedder's "unavailable" warning would be
        # a second stderr line beside any one-line error.
        embed_log = logging.getLogger("openclaw_lossless.embed.service")
        level = embed_log.level
        embed_log.setLevel(logging.ERROR)
        try:
            sidecar = Sidecar(settings.model_copy(update={"embedding_provider": "none"}), start_worker=False)
        finally:
            embed_log.setLevel(level)
    try:
        yield sidecar
    finally:
        sidecar.close()


def remote(settings: Settings) -> httpx.Client | None:
    """A client for the running sidecar, or None when none answers on the configured port."""
    url = f"http://{settings.host}:{settings.port}"
    try:
        token = settings.token.get_secret_value() if settings.token else settings.token_path.read_text().strip()
        httpx.get(f"{url}/healthz", timeout=0.5).raise_for_status()
    except (OSError, httpx.HTTPError):
        return None
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _query(settings: Settings, path: str, params: dict[str, Any], local: Callable[[Any], Any]) -> Any:
    client = remote(settings)
    if client is None:
        from openclaw_lossless.sidecar import store_for_queries

        with store_for_queries(settings) as sidecar:
            return local(sidecar)
    with client:
        response = client.get(path, params={k: v for k, v in params.items() if v is not None})
    if response.status_code >= 400:
        error = response.json().get("error", {})
        raise (
            BadRequest(error.get("message", response.text))
            if response.status_code < 500
            else LosslessError(error.get("message", response.text))
        )
    return response.json()


def _emit(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    text = json.dumps(data, indent=2, default=str, ensure_ascii=False) if as_json else human(data)
    if _SURROGATE.search(text):  # a lone surrogate (legal in JavaScript strings) cannot be printed as UTF-8
        text = json.dumps(data, indent=2, default=str) if as_json else _SURROGATE.sub("\ufffd", text)
    print(text)


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M UTC")


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
        return _port_taken(settings)
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


def _port_taken(settings: Settings) -> int:
    """``serve`` when the port is in use: exit 0 if it is this state dir's own sidecar (nothing to do), else 1."""
    from openclaw_lossless import listeners

    host = f"[{settings.host}]" if ":" in settings.host else settings.host
    url = f"http://{host}:{settings.port}"
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one answer line, not the probe's request log
    try:
        token: str | None = settings.token_path.read_text().strip()
    except OSError:
        token = None
    peer = listeners.who_serves(url, token)
    if peer is not None and peer["ours"]:
        pid = peer.get("pid")
        owner = "running"
        if _plugin_owns(settings, pid):
            owner = "started by the OpenClaw plugin, which restarts it if it stops"
        print(
            f"openclaw-lossless: already serving {settings.state_dir} on {url} (pid {pid}, {owner}); nothing to do."
            " To run it in this terminal instead, stop that one first (kill"
            f" {pid}) and set the plugin's autoStart to false."
        )
        return EXIT_OK
    holder = (
        f"another openclaw-lossless sidecar (pid {peer.get('pid')}) with a different state dir"
        if peer is not None
        else "another program"
    )
    print(
        f"openclaw-lossless: port {settings.port} on {settings.host} is held by {holder};"
        " stop it, or pass --port (and set the plugin's sidecarUrl to match)",
        file=sys.stderr,
    )
    return EXIT_FAILURE


def _plugin_owns(settings: Settings, pid: object) -> bool:
    """Whether ``<state_dir>/sidecar.owner`` (written by the plugin when it spawns a sidecar) names ``pid``."""
    try:
        return bool(json.loads((settings.state_dir / "sidecar.owner").read_text()).get("pid") == pid)
    except (OSError, ValueError, AttributeError):
        return False


def cmd_mcp(args: argparse.Namespace) -> int:
    from openclaw_lossless import mcp_server

    mcp_server.run(_settings(args))
    return EXIT_OK


def cmd_model_fetch(args: argparse.Namespace) -> int:
    from openclaw_lossless.embed.model_files import fetch_model

    path = fetch_model(_settings(args).model_dir, progress=lambda line: print(line, file=sys.stderr))
    print(f"model ready in {path}")
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
    _emit({"query": args.query, "hits": hits}, args.json, _human_hits)
    return EXIT_OK


def _filtered(args: argparse.Namespace) -> bool:
    return bool(args.role) or args.since is not None or args.until is not None


def _pool_may_be_cut(found: int) -> bool:
    """Whether a lane may have stopped at its depth, so matches beyond the hits returned can exist."""
    from openclaw_lossless.recall.assemble import LANE_DEPTH

    return found >= min(LANE_DEPTH, SEARCH_CEILING)


def _keep(hit: dict[str, Any], args: argparse.Namespace) -> bool:
    if args.role and hit["role"] != args.role:
        return False
    if args.since is not None and hit["createdAt"] < args.since:
        return False
    return not (args.until is not None and hit["createdAt"] > args.until)


def _human_hits(data: dict[str, Any]) -> str:
    if not data["hits"]:
        return "no matches"
    lines = []
    for hit in data["hits"]:
        text = " ".join(hit["text"].split())
        lines.append(
            f"[{hit['citation']}] {_when(hit['createdAt'])} {hit['role']} in {hit['sessionId']} "
            f"(score {hit['score']:.3f})\n    {text[:300]}"
        )
    return "\n".join(lines)


def cmd_pack(args: argparse.Namespace) -> int:
    settings = _settings(args)
    params = {"q": args.query, "budgetTokens": args.budget_tokens, "scope": _scope(args), "k": args.k}
    data = _query(
        settings, "/v1/pack", params, lambda s: s.pack(args.query, args.budget_tokens, params["scope"], args.k)
    )
    if not args.trace:
        data.pop("trace", None)
    _emit(data, args.json, lambda d: d["block"] or "nothing relevant found")
    return EXIT_OK


def cmd_recover(args: argparse.Namespace) -> int:
    settings = _settings(args)
    with open_sidecar(settings) as sidecar:
        session, up_to = args.session, None
        if args.snapshot:
            snap = sidecar.snapshot(args.snapshot)
            session, up_to = snap["sessionId"], snap["lastMessageId"]
        elif args.before_compaction is not None:
            point = sidecar.compaction(args.before_compaction)
            session, up_to = point["sessionId"], point["lastMessageId"]
        data = sidecar.recover(session, args.last, up_to)
    _emit(data, args.json, _markdown)
    return EXIT_OK


def _markdown(data: dict[str, Any], title: str = "Conversation") -> str:
    lines = [f"# {title} {data['sessionId']} (agent {data['agentId']})", ""]
    for message in data["messages"]:
        lines += [
            f"**{message['role']}** — {_when(message['createdAt'])} [{message['citation']}]",
            "",
            message["text"],
            "",
        ]
    return "\n".join(lines)


def cmd_stats(args: argparse.Namespace) -> int:
    settings = _settings(args)
    data = _query(settings, "/stats", {}, lambda s: s.stats())
    _emit(data, args.json, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items() if not isinstance(v, dict | list)))
    return EXIT_OK


# -- snapshots ----------------------------------------------------------------------------------------------


def cmd_snapshot(args: argparse.Namespace) -> int:
    with open_sidecar(_settings(args)) as sidecar:
        if args.snapshot_command == "create":
            data: Any = sidecar.snapshot_create(args.name, args.session)
            human: Callable[[Any], str] = lambda d: f"snapshot {d['name']} -> msg:{d['lastMessageId']}"  # noqa: E731
        elif args.snapshot_command == "list":
            data = {"snapshots": sidecar.snapshots()}
            human = _human_snapshots
        else:
            snap = sidecar.snapshot(args.name)
            recovered = sidecar.recover(snap["sessionId"], args.last, snap["lastMessageId"])
            data = snap | {"agentId": recovered["agentId"], "messages": recovered["messages"]}
            human = _human_snapshot
    _emit(data, args.json, human)
    return EXIT_OK


def _human_snapshot(data: dict[str, Any]) -> str:
    return _markdown(data, f"Snapshot {data['name']} of conversation")


def _human_snapshots(data: dict[str, Any]) -> str:
    rows = []
    for snap in data["snapshots"]:
        kind = " (automatic)" if snap["automatic"] else ""
        rows.append(
            f"{snap['name']}  {snap['sessionId']}  msg:{snap['lastMessageId']}  {_when(snap['createdAt'])}{kind}"
        )
    return "\n".join(rows) or "no snapshots"


# -- export, import -----------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    from openclaw_lossless.store.transfer import ExportScope, check_scope, export_store, write_jsonl

    with open_sidecar(_settings(args)) as sidecar:
        scope = ExportScope(args.agent, args.session)
        check_scope(sidecar.db.reader(), scope)  # before the output file is created or truncated
        records = export_store(sidecar.db.reader(), scope)
        if args.output in (None, "-"):
            counts = write_jsonl(records, sys.stdout)
        else:
            fd = os.open(args.output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a file that already exists
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                counts = write_jsonl(tqdm(records, desc="export", unit="line", disable=None), out)
    print("exported " + ", ".join(f"{counts[kind]} {label}" for kind, label in _EXPORTED.items()), file=sys.stderr)
    return EXIT_OK


_EXPORTED = {"message": "messages", "session": "sessions", "turn": "turns", "compaction": "compactions",
             "snapshot": "snapshots", "subagentLink": "subagent links"}  # fmt: skip


def cmd_import(args: argparse.Namespace) -> int:
    if not args.jsonl:
        return _import_openclaw(args)
    settings = _settings(args)
    with open_sidecar(settings) as sidecar:
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


def _human_counts(data: dict[str, Any]) -> str:
    return ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in data.items() if not isinstance(v, list | dict))


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
        open_sidecar(_settings(args)) as sidecar,
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
    _emit(asdict(report), args.json, _human_counts)
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
        _emit(found, args.json, _human_forget)
    if args.dry_run:
        return EXIT_OK
    if not args.yes and not _confirmed(found["forgotten"]):
        print("openclaw-lossless: nothing was forgotten", file=sys.stderr)
        return EXIT_USAGE
    done = _forget(settings, body | {"dryRun": False})
    _emit(done, args.json, _human_forget)
    return EXIT_OK


def _forget(settings: Settings, body: dict[str, Any]) -> Any:
    """Through the running sidecar when it serves this store (its vector index forgets too), else the file."""
    client = remote(settings)
    if client is None:
        from openclaw_lossless.api.forget import ForgetRequest
        from openclaw_lossless.store import forget

        request = ForgetRequest.model_validate(body)
        with open_sidecar(settings) as sidecar:
            return forget.run(
                sidecar.db, sidecar.index, settings.archive_dir, request.selector(), dry_run=request.dry_run
            )
    with client:
        response = client.post("/v1/forget", json=body)
    if response.status_code >= 400:
        error = response.json().get("error", {})
        cls = NotFound if response.status_code == 404 else BadRequest if response.status_code < 500 else LosslessError
        raise cls(error.get("message", response.text))
    return response.json()


def _confirmed(count: int) -> bool:
    if not sys.stdin.isatty():
        raise BadRequest("not a terminal: add --yes to forget without a confirmation, or --dry-run to only look")
    answer = input(f"Forget these {count} messages for good? This cannot be undone. [y/N] ")
    return answer.strip().lower() in ("y", "yes")


def _human_forget(data: dict[str, Any]) -> str:
    rows = []
    for item in data["messages"]:
        where = " (archived)" if item["archived"] else ""
        rows.append(
            f"{item['citation']}  {_when(item['createdAt'])}  {item['role']}  {item['sessionId']}{where}"
            f"  {item['excerpt']}"
        )
        if item.get("text") is not None:
            rows.append("    " + item["text"].replace("\n", "\n    "))
    verb = "would forget" if data["dryRun"] else "forgot"
    rows.append(f"{verb} {data['forgotten']} messages ({data['archived']} of them archived)")
    return "\n".join(rows)


# -- maintenance --------------------------------------------------------------------------------------------


def cmd_doctor(args: argparse.Namespace) -> int:
    from openclaw_lossless import doctor

    openclaw_state = Path(args.openclaw_state) if args.openclaw_state else None
    findings = doctor.run(_settings(args), profile=args.profile, openclaw_state=openclaw_state)
    data = {"ok": all(f.ok for f in findings), "findings": [f.view() for f in findings]}

    _emit(data, args.json, _human_findings)
    return EXIT_OK if data["ok"] else EXIT_FAILURE


def _human_findings(data: dict[str, Any]) -> str:
    """``ok``, ``BAD``, or ``note``: fine, but with something worth doing (a large backlog) and how."""
    lines = []
    for f in data["findings"]:
        mark = "BAD " if not f["ok"] else "note" if f["fix"] else "ok  "
        lines.append(f"{mark} {f['check']}: {f['detail']}" + (f"\n     fix: {f['fix']}" if f["fix"] else ""))
    return "\n".join(lines)


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
        open_sidecar(settings) as sidecar,
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
        with open_sidecar(settings) as sidecar:
            data["fts"] = reindex.rebuild_fts(sidecar.db, progress_file=sys.stderr)
    if want_vectors:
        running = remote(settings) is not None
        with open_sidecar(settings, embeddings=not running) as sidecar:
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
    client = remote(settings)
    if client is not None:
        with client:
            response = client.post("/v1/redact/rescan", json={"dryRun": args.dry_run}, timeout=None)
        if response.status_code >= 400:
            message = response.json().get("error", {}).get("message", response.text)
            raise BadRequest(message) if response.status_code < 500 else LosslessError(message)
        data = response.json()
    else:
        from openclaw_lossless.rescan import rescan_store

        bars: dict[str, tqdm[Any]] = {}

        def progress(place: str, done: int) -> None:
            if place not in bars:
                bars[place] = tqdm(desc=f"rescan {place}", unit="row", disable=None, file=sys.stderr)
            bars[place].update(done)

        try:
            with open_sidecar(settings) as sidecar:
                data = rescan_store(sidecar, dry_run=args.dry_run, progress=progress)
        finally:
            for bar in bars.values():
                bar.close()
    _emit(data, args.json, _human_rescan)
    return EXIT_OK


def _human_rescan(data: dict[str, Any]) -> str:
    verb = "would change" if data["dryRun"] else "changed"
    if not data["changed"]:
        return "nothing to change: everything stored already passes the current redaction rules"
    places = ", ".join(f"{place} {count}" for place, count in sorted(data["places"].items()))
    kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(data["kinds"].items(), key=lambda kv: -kv[1]))
    lines = [f"{verb}: {places}", f"placeholders by kind: {kinds or 'none'}"]
    if not data["dryRun"] and data["requeued"]:
        lines.append(f"{data['requeued']} messages queued to be embedded again from their redacted text")
    if data.get("resumed"):
        lines.append("(continued an interrupted rescan; the counts include its earlier part)")
    return "\n".join(lines)


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

    serve = _add(commands, "serve", cmd_serve, "start the sidecar (what the plugin auto-starts)", output=False)
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument(
        "--metrics-port", type=int, help="also serve GET /metrics without the token on this loopback port"
    )
    serve.add_argument("--embedding-provider", choices=["local", "openai-compatible", "none"])
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    mcp = _add(
        commands, "mcp", cmd_mcp, "serve memory_search to MCP clients (Claude Code, Codex) over stdio", output=False
    )
    mcp.add_argument("--host", help="the running sidecar's address (default 127.0.0.1)")

    model = commands.add_parser("model", help="manage the local embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True, metavar="command")
    _add(model_commands, "fetch", cmd_model_fetch, "download and build the local model (idempotent)", output=False)

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

    export = _add(
        commands, "export", cmd_export, "write messages as JSONL (whole store, an agent or a session)", output=False
    )
    export.add_argument("-o", "--output", help="file to write (default: standard output)")
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
