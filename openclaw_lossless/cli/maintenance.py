"""The commands that change or check a store: ``forget``, ``doctor``, ``salvage``, ``prune``, ``reindex``, ``redact``.

``forget`` and ``redact --rescan`` go through the running sidecar when it serves this store (its vector index
and writer see the change at once), else they work on the file; the rest always work on the file, which
SQLite's locking makes safe beside a running sidecar.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from tqdm import tqdm

from openclaw_lossless.api import readable
from openclaw_lossless.cli.common import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, emit, settings_of
from openclaw_lossless.cli.store_access import (
    answer,
    open_file_store,
    running_sidecar,
    serves_this_store,
    sidecar_or_file,
)
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest


def cmd_forget(args: argparse.Namespace) -> int:
    """Show what the selection names (always), then forget it after a confirmation (``--yes`` for scripts)."""
    settings = settings_of(args)
    body: dict[str, Any] = {
        "ids": args.citations,
        "sessionId": args.session,
        "agentId": args.agent,
        "since": args.since,
        "until": args.until,
        "match": args.match,
        "all": args.all,
    }
    if args.file is not None:  # only sent when asked: a sidecar older than the memory files knows no "file"
        body["file"] = args.file
    found = _forget(settings, body | {"dryRun": True})
    if args.dry_run or not args.yes:
        emit(found, args.json, readable.forget)
    if args.dry_run:
        return EXIT_OK
    if not args.yes and not _confirmed(found["forgotten"]):
        print("openclaw-lossless: nothing was forgotten", file=sys.stderr)
        return EXIT_USAGE
    done = _forget(settings, body | {"dryRun": False})
    emit(done, args.json, readable.forget)
    return EXIT_OK


def _forget(settings: Settings, body: dict[str, Any]) -> Any:
    """Through the running sidecar when it serves this store (its vector index forgets too), else the file."""

    def on_file() -> Any:
        from openclaw_lossless.api.forget import ForgetParts, ForgetRequest, ForgetResponse, chunks_of, run_forget
        from openclaw_lossless.api.responses import wire
        from openclaw_lossless.api.spool import store_spooled

        request = ForgetRequest.model_validate(body)
        with open_file_store(settings) as sidecar:
            store = sidecar.store
            selector = request.selector(chunks_of(store, request))
            parts = ForgetParts(store, sidecar.index, settings, first=lambda: store_spooled(sidecar))
            done = run_forget(parts, selector, request.dry_run)
        return wire(ForgetResponse, done)

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
    findings = doctor.run(settings_of(args), profile=args.profile, openclaw_state=openclaw_state)
    data = {"ok": all(f.ok for f in findings), "findings": [f.view() for f in findings]}

    emit(data, args.json, readable.findings)
    return EXIT_OK if data["ok"] else EXIT_FAILURE


def cmd_salvage(args: argparse.Namespace) -> int:
    from openclaw_lossless import salvage

    source = settings_of(args).database_path
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

    emit(data, args.json, human)
    return EXIT_OK if data["complete"] else EXIT_FAILURE


def cmd_prune(args: argparse.Namespace) -> int:
    from openclaw_lossless.api.responses import PrunedView, WouldPruneView, wire
    from openclaw_lossless.store.model.archive import Pruned

    settings = settings_of(args)
    limit = settings.max_db_size_mb if args.max_db_size_mb is None else args.max_db_size_mb
    with open_file_store(settings) as sidecar, tqdm(desc="archive", unit="msg", disable=None, file=sys.stderr) as bar:
        store = sidecar.store
        result = store.ops.archive.prune(
            store.db, settings.archive_dir, limit, dry_run=args.dry_run, progress=bar.update
        )
    data = wire(PrunedView if isinstance(result, Pruned) else WouldPruneView, result)
    verb = "would archive" if args.dry_run else "archived"
    emit(data, args.json, lambda d: d.get("skipped") or f"{verb} {d['pruned']} messages (limit {limit} MB)")
    return EXIT_OK


def cmd_reindex(args: argparse.Namespace) -> int:
    from openclaw_lossless import reindex

    settings = settings_of(args)
    want_fts, want_vectors = args.fts or not args.vectors, args.vectors or not args.fts
    data: dict[str, Any] = {}
    if want_fts:
        with open_file_store(settings) as sidecar:
            data["fts"] = reindex.rebuild_fts(sidecar.store, progress_file=sys.stderr)
    if want_vectors:
        running = serves_this_store(settings)
        with open_file_store(settings, embeddings=not running) as sidecar:
            data["vectors"] = reindex.rebuild_vectors(
                sidecar, missing_only=args.missing, drain=not running, progress_file=sys.stderr
            )
    emit(data, args.json, lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()))
    return EXIT_OK


def cmd_redact(args: argparse.Namespace) -> int:
    """``redact --rescan``: through the running sidecar when it serves this store, else on the file."""
    if not args.rescan:
        raise BadRequest("redact needs --rescan (apply the current rules to what is stored; add --dry-run to look)")
    settings = settings_of(args)
    client = running_sidecar(settings)
    if client is not None:
        with client:
            data = answer(client.post("/v1/redact/rescan", json={"dryRun": args.dry_run}, timeout=None))
    else:
        from openclaw_lossless.api.responses import RescanResponse, wire
        from openclaw_lossless.rescan import rescan_store

        bars: dict[str, tqdm[Any]] = {}

        def progress(place: str, done: int) -> None:
            if place not in bars:
                bars[place] = tqdm(desc=f"rescan {place}", unit="row", disable=None, file=sys.stderr)
            bars[place].update(done)

        try:
            with open_file_store(settings) as sidecar:
                data = wire(RescanResponse, rescan_store(sidecar, dry_run=args.dry_run, progress=progress))
        finally:
            for bar in bars.values():
                bar.close()
    emit(data, args.json, readable.rescan)
    return EXIT_OK
