"""The command line: ``openclaw-lossless <command>`` (also ``python -m openclaw_lossless``).

Every command prints a one-line error and exits non-zero on bad input (never a traceback): 2 for usage and
bad input, 1 for a failure of the store or the embedder, 0 for success.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from openclaw_lossless import __version__
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest, LosslessError

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("host", "port", "state_dir", "db_path", "model_dir", "embedding_provider"):
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


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from openclaw_lossless.app import create_app

    settings = _settings(args)
    if not is_loopback(settings.host) and not settings.allow_remote:
        raise BadRequest(f"refusing to listen on {settings.host}: it is not loopback; pass --allow-remote to mean it")
    os.umask(0o077)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=args.log_level, access_log=False)
    return EXIT_OK


def cmd_model_fetch(args: argparse.Namespace) -> int:
    from openclaw_lossless.embed.model_files import fetch_model

    settings = _settings(args)
    path = fetch_model(settings.model_dir)
    print(f"model ready in {path}")
    return EXIT_OK


def _print(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    print(json.dumps(data, indent=2, default=str) if as_json else human(data))


def cmd_stats(args: argparse.Namespace) -> int:
    from openclaw_lossless.sidecar import Sidecar

    sidecar = Sidecar(_settings(args), start_worker=False)
    try:
        data = sidecar.stats()
    finally:
        sidecar.close()
    _print(data, args.json, lambda d: "\n".join(f"{k}: {v}" for k, v in d.items() if not isinstance(v, dict)))
    return EXIT_OK


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", type=Path, help="where the database and token live")
    parser.add_argument("--db-path", type=Path, help="the database file (default: <state-dir>/lossless.sqlite)")
    parser.add_argument("--model-dir", type=Path, help="where the local embedding model is kept")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="openclaw-lossless", description="A lossless context engine for OpenClaw.")
    parser.add_argument("--version", action="version", version=f"openclaw-lossless {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="start the sidecar (what the plugin auto-starts)")
    _common(serve)
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to listen on (default 8377)")
    serve.add_argument("--allow-remote", action="store_true", help="allow a non-loopback --host")
    serve.add_argument("--embedding-provider", choices=["local", "openai-compatible", "none"])
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    serve.set_defaults(func=cmd_serve)

    model = commands.add_parser("model", help="manage the local embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True)
    fetch = model_commands.add_parser("fetch", help="download and build the local model (idempotent)")
    _common(fetch)
    fetch.set_defaults(func=cmd_model_fetch)

    stats = commands.add_parser("stats", help="counts, sizes and backlog of the store")
    _common(stats)
    stats.add_argument("--json", action="store_true", help="machine-readable output")
    stats.set_defaults(func=cmd_stats)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except LosslessError as exc:
        print(f"openclaw-lossless: {exc.message}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, BadRequest) else EXIT_FAILURE
    except ValidationError as exc:
        first = exc.errors()[0]
        print(f"openclaw-lossless: bad setting {'.'.join(map(str, first['loc']))}: {first['msg']}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
