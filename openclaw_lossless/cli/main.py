"""The command line: ``openclaw-lossless <command>`` (also ``python -m openclaw_lossless``).

Queries (search, pack, stats) go to the running sidecar when it serves the store the command names (warm
model, warm index) and open that database file directly otherwise (``store_access.py``). Writes (snapshot,
import, prune, reindex) always go to the file: SQLite's locking makes that safe next to a running sidecar,
whose worker then embeds whatever was queued. Exit codes: 0 success, 1 a failure (the store, the embedder,
a doctor finding, ...), 2 bad input (including a session, snapshot or compaction that does not exist, and
usage errors), 130 interrupted; errors are one line on stderr, never a traceback. Here: the parser, the
queries, snapshots and transfer; ``serve.py``, ``maintenance.py`` and ``migrate.py`` hold the other commands.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from pydantic import ValidationError
from tqdm import tqdm

from openclaw_lossless import __version__
from openclaw_lossless.api import readable
from openclaw_lossless.api.responses import (
    MessageResponse,
    PackResponse,
    RecoverResponse,
    SearchResponse,
    SnapshotMadeView,
    SnapshotsResponse,
    SnapshotView,
    StatsResponse,
    wire,
)
from openclaw_lossless.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    SEARCH_CEILING,
    Parser,
    add_command,
    ask,
    citation,
    emit,
    megabytes,
    profile,
    query_text,
    scope_flags,
    settings_of,
    timestamp,
    until,
    whole,
)
from openclaw_lossless.cli.maintenance import cmd_doctor, cmd_forget, cmd_prune, cmd_redact, cmd_reindex, cmd_salvage
from openclaw_lossless.cli.migrate import register as register_migrate_store
from openclaw_lossless.cli.serve import cmd_mcp, cmd_model_fetch, cmd_serve
from openclaw_lossless.cli.store_access import open_file_store
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest, LosslessError, NotFound
from openclaw_lossless.store.backend import SQLITE, edge_errors

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
    settings = settings_of(args)
    filtered = _filtered(args)
    params = {"q": args.query, "scope": _scope(args), "k": SEARCH_CEILING if filtered else args.k, "mode": args.mode}
    if args.source != "all":  # only asked for: a sidecar older than the workspace memory files knows no source
        params["source"] = args.source
    data = ask(
        settings,
        "/v1/search",
        params,
        lambda s: wire(
            SearchResponse, s.queries.search(args.query, params["scope"], params["k"], args.mode, args.source)
        ),
    )
    hits = [h for h in data["hits"] if _keep(h, args)][: args.k]
    if filtered and len(hits) < args.k and _pool_may_be_cut(len(data["hits"])):
        print(
            f"openclaw-lossless: note: --role/--since/--until chose from the best {len(data['hits'])} hits only;"
            " narrow the query, --agent or --session to reach older matches",
            file=sys.stderr,
        )
    missed = readable.lanes_missed(data)
    if missed is not None:
        print(f"openclaw-lossless: note: {missed}", file=sys.stderr)
    answer = {"query": args.query, "hits": hits} | {key: data[key] for key in ("lanesRan", "skipped") if key in data}
    emit(answer, args.json, readable.hits)
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
    settings = settings_of(args)
    params = {"q": args.query, "budgetTokens": args.budget_tokens, "scope": _scope(args), "k": args.k}
    data = ask(
        settings,
        "/v1/pack",
        params,
        lambda s: wire(PackResponse, s.queries.pack(args.query, args.budget_tokens, params["scope"], args.k)),
    )
    if not args.trace:
        data.pop("trace", None)
    emit(data, args.json, readable.pack)
    return EXIT_OK


def cmd_recover(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    if args.citation is not None:
        return _open_citation(settings, args)
    with open_file_store(settings) as sidecar:
        queries = sidecar.queries
        session, up_to = args.session, None
        if args.snapshot:
            snap = queries.snapshot(args.snapshot)
            session, up_to = snap.session_id, snap.last_message_id
        elif args.before_compaction is not None:
            point = queries.compaction(args.before_compaction)
            session, up_to = point.session_id, point.last_message_id
        data = wire(RecoverResponse, queries.recover(session, args.last, up_to))
    emit(data, args.json, readable.conversation)
    return EXIT_OK


def _open_citation(settings: Settings, args: argparse.Namespace) -> int:
    """``recover msg:N``: the cited message and its session's neighbours, as ``lossless_recover`` shows it."""
    if args.session or args.snapshot or args.before_compaction is not None:
        print(
            "openclaw-lossless: recover msg:N opens one message; leave out --session, --snapshot and"
            " --before-compaction (or drop msg:N to print a conversation)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    message_id = int(args.citation.removeprefix("msg:"))
    data = ask(
        settings,
        f"/v1/messages/{message_id}",
        {"context": args.context},
        lambda s: wire(MessageResponse, s.queries.message(message_id, args.context)),
    )
    emit(data, args.json, readable.cited)
    return EXIT_OK


def cmd_stats(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    data = ask(settings, "/stats", {}, lambda s: wire(StatsResponse, s.status.stats()))
    emit(data, args.json, readable.stats)
    return EXIT_OK


# -- snapshots ----------------------------------------------------------------------------------------------


def cmd_snapshot(args: argparse.Namespace) -> int:
    with open_file_store(settings_of(args)) as sidecar:
        queries, ingest = sidecar.queries, sidecar.ingest
        if args.snapshot_command == "create":
            data: Any = wire(SnapshotMadeView, ingest.snapshot_create(args.name, args.session))
            human: Callable[[Any], str] = lambda d: f"snapshot {d['name']} -> msg:{d['lastMessageId']}"  # noqa: E731
        elif args.snapshot_command == "list":
            data = wire(SnapshotsResponse, {"snapshots": queries.snapshots()})
            human = readable.snapshots
        else:
            snap = queries.snapshot(args.name)
            recovered = wire(RecoverResponse, queries.recover(snap.session_id, args.last, snap.last_message_id))
            data = wire(SnapshotView, snap) | {"agentId": recovered["agentId"], "messages": recovered["messages"]}
            human = readable.snapshot
    emit(data, args.json, human)
    return EXIT_OK


# -- export, import -----------------------------------------------------------------------------------------


def cmd_export(args: argparse.Namespace) -> int:
    from openclaw_lossless.store.model.transfer.export import ExportScope, write_jsonl

    to_file = args.output not in (None, "-")
    exists = to_file and os.path.lexists(args.output) and not os.path.isdir(args.output)  # a directory: exit 1
    if exists and not args.force:  # checked before the store is opened
        raise BadRequest(f"{args.output} already exists; export does not overwrite it without --force")
    with open_file_store(settings_of(args)) as sidecar:
        scope, store = ExportScope(args.agent, args.session), sidecar.store
        store.ops.transfer.check_scope(store.db.reader(), scope)  # before the output file is created or truncated
        records = store.ops.transfer.export_store(store.db.reader(), scope)
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
    if args.claude_code and (args.jsonl or args.openclaw_state):
        raise BadRequest("--claude-code reads Claude Code's sessions: leave out --jsonl and --openclaw-state")
    if args.claude_code:
        return _import_claude_code(args)
    if not args.jsonl:
        return _import_openclaw(args)
    settings = settings_of(args)
    with open_file_store(settings) as sidecar:
        with tqdm(desc="import", unit="msg", disable=None, file=sys.stderr) as bar:
            store = sidecar.store
            report: Any = store.ops.transfer.restore_jsonl(
                store.db, Path(args.jsonl), sidecar.capture_options, bar.update
            )
        data = vars(report)
    emit(
        data,
        args.json,
        lambda d: ", ".join(f"{k.replace('_', ' ')}: {v}" for k, v in d.items() if not isinstance(v, list | dict)),
    )
    return EXIT_OK


def _import_claude_code(args: argparse.Namespace) -> int:
    """Import Claude Code's session transcripts as agent ``claude-code`` (``transcripts/claude_code.py``)."""
    from dataclasses import asdict

    from openclaw_lossless.transcripts.claude_code import read_claude_code

    settings = settings_of(args)
    projects = settings.claude_code_dir
    if not projects.is_dir():
        raise NotFound(f"no Claude Code projects dir at {projects}: set LOSSLESS_CLAUDE_CODE_DIR or CLAUDE_CONFIG_DIR")
    with (
        open_file_store(settings) as sidecar,
        tqdm(desc="import", unit="msg", disable=None, file=sys.stderr) as bar,
    ):
        report = read_claude_code(sidecar.ingest, projects, progress=lambda done, total: bar.update(done - bar.n))
    for detail in report.details:
        if detail.error is not None:
            print(f"openclaw-lossless: {detail.error}", file=sys.stderr)
    emit(asdict(report), args.json, readable.counts)
    return EXIT_FAILURE if report.errors else EXIT_OK


def _import_openclaw(args: argparse.Namespace) -> int:
    """Import OpenClaw's history; a source that could not be read is named with its reason and makes it exit 1.

    The other sources are still imported (one damaged agent database must not hold back the rest), so the
    counts are printed either way; the exit code is what tells a script that something was left behind.
    """
    from dataclasses import asdict

    from openclaw_lossless.config import openclaw_state_dir
    from openclaw_lossless.transcripts import read_transcripts

    source = Path(args.openclaw_state) if args.openclaw_state else openclaw_state_dir()
    with (
        open_file_store(settings_of(args)) as sidecar,
        tqdm(desc="import", unit="msg", disable=None, file=sys.stderr) as bar,
    ):
        report = read_transcripts(
            sidecar.ingest,
            source,
            agent=args.agent,
            session_id=args.session,
            progress=lambda done, total: bar.update(done - bar.n),
        )
    for detail in report.details:
        if detail.error is not None:
            print(f"openclaw-lossless: {detail.error}", file=sys.stderr)
    emit(asdict(report), args.json, readable.counts)
    return EXIT_FAILURE if report.errors else EXIT_OK


# -- wiring -------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="openclaw-lossless", description="A lossless context engine for OpenClaw.")
    parser.add_argument("--version", action="version", version=f"openclaw-lossless {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="command")

    serve = add_command(commands, "serve", cmd_serve, "start the sidecar (what the plugin auto-starts)")
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument(
        "--metrics-port", type=int, help="also serve GET /metrics without the token on this loopback port"
    )
    serve.add_argument("--embedding-provider", choices=["local", "openai-compatible", "none"])
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--watch",
        action="store_true",
        help="store every agent's turns from OpenClaw's transcripts within seconds, whichever engine runs",
    )
    serve.add_argument(
        "--claude-code", action="store_true", help="also store Claude Code's sessions (~/.claude/projects) as they grow"
    )

    mcp = add_command(commands, "mcp", cmd_mcp, "serve memory_search to MCP clients (Claude Code, Codex) over stdio")
    mcp.add_argument("--host", help="the running sidecar's address (default 127.0.0.1)")

    model = commands.add_parser("model", help="manage the local embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True, metavar="command")
    fetch = add_command(model_commands, "fetch", cmd_model_fetch, "download and build the local model (idempotent)")
    fetch.add_argument(
        "--model",
        dest="local_model",
        choices=["all-MiniLM-L6-v2", "multilingual-e5-small"],
        help="which local model (default: LOSSLESS_LOCAL_MODEL, else all-MiniLM-L6-v2)",
    )

    search = add_command(commands, "search", cmd_search, "hybrid search over the stored history")
    search.add_argument("query", type=query_text, help="what to look for, in plain words")
    scope_flags(search)
    search.add_argument("--role", help="only messages of this role (user, assistant, toolResult, ...)")
    search.add_argument(
        "--since", type=timestamp, help="only messages from this time on: ISO date or time; no offset means UTC"
    )
    search.add_argument(
        "--until",
        type=until,
        help="only messages up to this time, e.g. 2026-03-01 (that whole day) or 2026-03-01T12:00+02:00;"
        " no offset means UTC",
    )
    search.add_argument("--mode", choices=["hybrid", "keyword", "vector"], default="hybrid")
    search.add_argument(
        "--source",
        choices=["all", "memory", "messages"],
        default="all",
        help="memory: the agents' workspace memory files only; messages: the conversation only (default all)",
    )
    search.add_argument("-k", type=whole(1, SEARCH_CEILING), default=10, help="how many hits (default 10, at most 200)")

    pack = add_command(commands, "pack", cmd_pack, "the bounded, cited context bundle for a query")
    pack.add_argument("--query", type=query_text, required=True, help="what the bundle is for")
    pack.add_argument(
        "--budget-tokens",
        type=whole(100, 1_000_000),
        default=2000,
        help="token budget of the bundle (default 2000, from 100 to 1000000)",
    )
    pack.add_argument("--trace", action="store_true", help="include every candidate's score parts and fate")
    pack.add_argument("-k", type=whole(1, 200), help="at most this many items (default: retrievalCount)")
    scope_flags(pack)

    recover = add_command(
        commands, "recover", cmd_recover, "open a citation msg:N in its place, or print a conversation as it was"
    )
    recover.add_argument(
        "citation", nargs="?", metavar="msg:N", type=citation, help="the message to open, with its neighbours"
    )
    recover.add_argument(
        "--context", type=whole(0, 50), default=3, help="with msg:N: messages either side (default 3, at most 50)"
    )
    recover.add_argument("--last", type=whole(1), default=50, help="how many messages (default 50)")
    recover.add_argument("--session", help="the session (default: the most recent one)")
    point = recover.add_mutually_exclusive_group()
    point.add_argument("--snapshot", help="as it was at this snapshot")
    point.add_argument("--before-compaction", type=whole(1), metavar="N", help="as it was before compaction N")

    snapshot = commands.add_parser("snapshot", help="named checkpoints of a session (never destructive)")
    snapshot_commands = snapshot.add_subparsers(dest="snapshot_command", required=True, metavar="command")
    create = add_command(snapshot_commands, "create", cmd_snapshot, "name the current end of a session")
    create.add_argument("name")
    create.add_argument("--session", help="the session (default: the most recent one)")
    add_command(snapshot_commands, "list", cmd_snapshot, "list snapshots, manual and automatic")
    show = add_command(snapshot_commands, "show", cmd_snapshot, "show a snapshot and the conversation up to it")
    show.add_argument("name")
    show.add_argument("--last", type=whole(1), default=50, help="how many messages (default 50)")

    export = add_command(commands, "export", cmd_export, "write messages as JSONL (whole store, an agent or a session)")
    export.add_argument("-o", "--output", help="file to write (default: standard output); never overwritten")
    export.add_argument("--force", action="store_true", help="overwrite the -o file if it exists")
    scope_flags(export)

    imp = add_command(commands, "import", cmd_import, "bring in an OpenClaw installation's history, or a JSONL export")
    imp.add_argument("--jsonl", help="an export or archive file (.jsonl or .jsonl.gz) instead of OpenClaw's history")
    imp.add_argument("--openclaw-state", help="OpenClaw's state dir (default: $OPENCLAW_STATE_DIR or ~/.openclaw)")
    imp.add_argument(
        "--claude-code",
        action="store_true",
        help="Claude Code's sessions instead (agent claude-code; default dir: $CLAUDE_CONFIG_DIR/projects or"
        " ~/.claude/projects, or LOSSLESS_CLAUDE_CODE_DIR)",
    )
    scope_flags(imp)

    add_command(commands, "stats", cmd_stats, "counts, sizes, backlog and latencies")
    forget = add_command(commands, "forget", cmd_forget, "remove messages for good, and keep them from coming back")
    forget.add_argument("citations", nargs="*", metavar="msg:N", type=citation, help="the messages to forget")
    scope_flags(forget)
    forget.add_argument("--since", type=timestamp, help="only messages from this time on (ISO; no offset: UTC)")
    forget.add_argument("--until", type=until, help="only messages up to this time (a date alone: that whole day)")
    forget.add_argument("--match", type=query_text, help="only messages holding every word of this query")
    forget.add_argument("--all", action="store_true", help="let a time range alone select every stored message")
    forget.add_argument(
        "--file", help="the chunks of a workspace memory file, by its path in the workspace (MEMORY.md, memory/...)"
    )
    forget.add_argument("--dry-run", action="store_true", help="show exactly what would go, change nothing")
    forget.add_argument("--yes", action="store_true", help="no confirmation question (for scripts)")
    doctor = add_command(commands, "doctor", cmd_doctor, "check the installation; each finding says how to fix it")
    doctor.add_argument("--profile", type=profile, help="the gateway's OpenClaw profile (openclaw --profile)")
    doctor.add_argument("--openclaw-state", help="OpenClaw's state dir (default: $OPENCLAW_STATE_DIR or ~/.openclaw)")

    salvage = add_command(
        commands,
        "salvage",
        cmd_salvage,
        "copy every readable row of a damaged database into a new file (the damaged one is only read)",
    )
    salvage.add_argument("--out", help="the new file (default: <database>-salvaged.sqlite next to it)")

    prune = add_command(
        commands, "prune", cmd_prune, "archive the oldest messages to compressed JSONL, then remove them"
    )
    prune.add_argument("--dry-run", action="store_true", help="say what would be archived, change nothing")
    prune.add_argument(
        "--max-db-size-mb", type=megabytes, help="the limit to prune to (default: maxDbSizeMb; 0: never prune)"
    )

    reindex = add_command(
        commands, "reindex", cmd_reindex, "rebuild the full-text index and/or the vectors (resumable)"
    )
    reindex.add_argument("--fts", action="store_true", help="rebuild the full-text index")
    reindex.add_argument("--vectors", action="store_true", help="re-embed messages")
    reindex.add_argument("--missing", action="store_true", help="with --vectors: only messages without a vector")

    redact = add_command(commands, "redact", cmd_redact, "apply the current redaction rules to what is already stored")
    redact.add_argument(
        "--rescan", action="store_true", help="re-redact messages, originals, summaries and archives (resumable)"
    )
    redact.add_argument(
        "--dry-run", action="store_true", help="with --rescan: report what would change, change nothing"
    )
    register_migrate_store(commands)
    return parser


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
    except edge_errors() as exc:  # a damaged page met outside a translated path
        print(f"openclaw-lossless: {SQLITE.translate_error(exc)}", file=sys.stderr)
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
