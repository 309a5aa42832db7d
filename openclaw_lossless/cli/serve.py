"""The commands that run a server or prepare one: ``serve``, ``mcp`` and ``model fetch``.

``serve`` binds its port before it opens anything: a port already held is one line (and with ``--json`` one
JSON line) saying whether this store's own sidecar holds it (exit 0, nothing to do) or something else (exit 1).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import sys

from openclaw_lossless.auth_token import read_token
from openclaw_lossless.cli.common import EXIT_FAILURE, EXIT_OK, emit, settings_of
from openclaw_lossless.cli.store_access import base_url, serves_this_store
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.listeners import is_loopback


def cmd_serve(args: argparse.Namespace) -> int:
    from openclaw_lossless.app import create_app, server_config

    settings = settings_of(args)
    if not is_loopback(settings.host) and not settings.allow_remote:
        raise BadRequest(f"refusing to listen on {settings.host}: it is not loopback; pass --allow-remote to mean it")
    os.umask(0o077)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from openclaw_lossless import listeners
    from openclaw_lossless.observe import prometheus
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
            freeze_startup()
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


def freeze_startup() -> None:
    """Put what start-up made (modules, the app, the store's and the model's objects) out of the collector's
    reach, once, just before serving.

    Why: CPython's full collection walks every object it tracks, and most of a sidecar's are start-up's, alive
    as long as the process: each full collection paused the turn it fell in (docs/decisions/0009). Frozen, one
    walks what turns made since. Garbage is collected first, so none of it is kept for good.
    """
    gc.collect()
    gc.freeze()


def _port_taken(settings: Settings, as_json: bool) -> int:
    """``serve`` when the port is in use: exit 0 if this store's own sidecar holds it (nothing to do), else 1.

    Nothing has been opened yet (no database, no model): only the token is read, to check the holder's proof.
    """
    from openclaw_lossless import listeners
    from openclaw_lossless.api.identity import store_id

    url = base_url(settings)
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one answer line, not the probe's request log
    peer = listeners.who_serves(url, read_token(settings))
    if peer is not None and peer["ours"] and peer.get("store") == store_id(settings):
        pid = peer.get("pid")
        plugin = _plugin_owns(settings, pid)
        owner = "started by the OpenClaw plugin, which restarts it if it stops" if plugin else "running"
        data = {"status": "alreadyServing", "url": url, "pid": pid, "stateDir": str(settings.state_dir),
                "startedByPlugin": plugin}  # fmt: skip
        emit(data, as_json, lambda _: (
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
        emit({"status": "portTaken", "url": url, "pid": None if peer is None else peer.get("pid")}, True, str)
    return EXIT_FAILURE


def _plugin_owns(settings: Settings, pid: object) -> bool:
    """Whether ``<state_dir>/sidecar.owner`` (written by the plugin when it spawns a sidecar) names ``pid``."""
    try:
        return bool(json.loads((settings.state_dir / "sidecar.owner").read_text()).get("pid") == pid)
    except (OSError, ValueError, AttributeError):
        return False


def cmd_mcp(args: argparse.Namespace) -> int:
    from openclaw_lossless.cli import mcp_server

    settings = settings_of(args)
    if args.json:  # stdout is the MCP stream: the start-up line goes to stderr
        start = {"status": "serving", "transport": "stdio", "database": str(settings.database_path),
                 "sidecar": base_url(settings) if serves_this_store(settings) else None}  # fmt: skip
        print(json.dumps(start), file=sys.stderr, flush=True)
    mcp_server.run(settings)
    return EXIT_OK


def cmd_model_fetch(args: argparse.Namespace) -> int:
    from openclaw_lossless.embed.model_files import fetch_model, spec_of

    settings = settings_of(args)
    say = lambda line: print(line, file=sys.stderr)  # noqa: E731
    path = fetch_model(settings.model_dir, progress=say, spec=spec_of(settings.local_model))
    emit({"ready": True, "path": str(path)}, args.json, lambda d: f"model ready in {d['path']}")
    return EXIT_OK
