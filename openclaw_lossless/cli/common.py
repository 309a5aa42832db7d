"""What every command shares: exit codes, settings from the flags, printing, and the argument types.

The argument types check numbers, times and names while parsing, so a query refuses bad input the same way
(exit 2, one line) whether it would have reached the running sidecar or the database file.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

from openclaw_lossless.cli.store_access import query
from openclaw_lossless.config import Settings

EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2
# The most hits /v1/search returns (its bound on k): a --role/--since/--until filter picks from this many.
SEARCH_CEILING = 200
SURROGATE = re.compile("[\ud800-\udfff]")
Handler = Callable[[argparse.Namespace], int]


def settings_of(args: argparse.Namespace) -> Settings:
    """The settings from the environment, with the flags this command was given on top."""
    overrides: dict[str, Any] = {}
    names: tuple[str, ...] = ("host", "port", "state_dir", "db_path", "database_url", "model_dir")
    names += ("embedding_provider", "metrics_port", "local_model")
    for name in names:
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    for flag in ("allow_remote", "watch", "claude_code"):  # on when given; else the environment says
        if getattr(args, flag, False):
            overrides[flag] = True
    return Settings(**overrides)


def ask(settings: Settings, path: str, params: dict[str, Any], local: Callable[[Any], Any]) -> Any:
    """A query's answer, from the sidecar serving this store or else the file (``store_access.query``)."""
    return query(settings, path, params, local)[1]


def emit(data: Any, as_json: bool, human: Callable[[Any], str]) -> None:
    text = json.dumps(data, indent=2, default=str, ensure_ascii=False) if as_json else human(data)
    if SURROGATE.search(text):  # a lone surrogate (legal in JavaScript strings) cannot be printed as UTF-8
        text = json.dumps(data, indent=2, default=str) if as_json else SURROGATE.sub("\ufffd", text)
    print(text)


def common_flags(parser: argparse.ArgumentParser, *, output: bool = True) -> None:
    parser.add_argument("--state-dir", type=Path, help="where the database and token live")
    parser.add_argument("--db-path", type=Path, help="the database file (default: <state-dir>/lossless.sqlite)")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="a PostgreSQL store instead of the file: postgresql://user@host/db (keep the password in"
        " PGPASSWORD or ~/.pgpass, or the URL in LOSSLESS_DATABASE_URL: a flag shows in the process list)",
    )
    parser.add_argument("--model-dir", type=Path, help="where the local embedding model is kept")
    parser.add_argument("--port", type=int, help="the running sidecar's port (default 8377)")
    if output:
        parser.add_argument("--json", action="store_true", help="machine-readable output")


def timestamp(value: str) -> float:
    """An ISO date or time as epoch seconds: its offset is honoured; without one it is UTC, as stored times are."""
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a date: {value!r} (use YYYY-MM-DD or an ISO time)") from exc
    return (parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)).timestamp()


def until(value: str) -> float:
    """As ``timestamp``, but a date alone means the end of that day: ``--until 2026-03-01`` includes the 1st."""
    moment = timestamp(value)
    return moment + 86400 - 0.001 if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()) else moment


def query_text(value: str) -> str:
    """A query as the sidecar's API takes it (1-20000 characters, here also not blank), checked on both paths."""
    if not value.strip() or len(value) > 20_000:
        raise argparse.ArgumentTypeError("a query is 1 to 20000 characters, not blank")
    return value


def citation(value: str) -> str:
    """``msg:N`` (or N), checked while parsing."""
    if not re.fullmatch(r"(?:msg:)?[1-9][0-9]{0,17}", value.strip()):
        raise argparse.ArgumentTypeError(f"a citation is msg:N with N a whole number of 1 or more, not {value!r}")
    return value.strip()


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
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


def megabytes(value: str) -> float:
    """A size limit in MB: 0 or more (0 means never prune, as for maxDbSizeMb)."""
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"expected a size in MB of 0 or more (0: never prune), not {value!r}")
    return number


def profile(value: str) -> str:
    """An OpenClaw profile name as ``openclaw --profile`` takes it (letters, digits, '_' and '-')."""
    from openclaw_lossless.doctor.host_config import PROFILE_NAME

    if not PROFILE_NAME.match(value):
        raise argparse.ArgumentTypeError(f"invalid profile {value!r}: use letters, numbers, '_' and '-' only")
    return value


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line with a pointer to --help (exit 2), not the whole usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def add_command(commands: Any, name: str, handler: Handler, help_text: str, **kw: Any) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text, description=help_text)
    common_flags(parser, **kw)
    parser.set_defaults(func=handler)
    return parser


def scope_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--agent", help="only this agent's history")
    parser.add_argument("--session", help="only this session")
