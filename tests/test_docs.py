"""The README keeps up with the code: every CLI command, HTTP endpoint and setting is documented there."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from openclaw_lossless.app import create_app
from openclaw_lossless.cli import build_parser
from openclaw_lossless.config import Settings

README = (Path(__file__).parents[1] / "README.md").read_text()


def commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    found: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.append(f"{prefix}{name}")
                found += commands(sub, f"{prefix}{name} ")
    return found


def test_every_cli_command_is_in_the_readme() -> None:
    listed = commands(build_parser())
    assert {"serve", "search", "recover", "snapshot create", "import", "export", "pack", "doctor"} <= set(listed)
    missing = [name for name in listed if f"`{name}" not in README]
    assert not missing, f"undocumented commands: {missing}"


def test_every_setting_is_in_the_readme() -> None:
    table = {m.group(1) for m in re.finditer(r"^\| (\w+) \|", README, re.M)}
    camel = {"retrieval_count": "retrievalCount", "window_share": "windowShare",
             "recency_decay_hours": "recencyDecayHours", "skip_heartbeats": "skipHeartbeats",
             "max_db_size_mb": "maxDbSizeMb", "min_similarity": "minSimilarity",
             "recall_scope": "recallScope", "recency_floor": "recencyFloor",
             "neighbour_radius": "neighbourRadius", "recall_token_budget": "recallTokenBudget"}  # fmt: skip
    missing = [name for name in Settings.model_fields if camel.get(name, name) not in table]
    assert not missing, f"undocumented settings: {missing}"


def test_every_http_endpoint_is_in_the_readme(tmp_path: Path) -> None:
    app = create_app(Settings(state_dir=tmp_path))
    paths = [re.sub(r"\{\w+\}", "{", path) for path in app.openapi()["paths"] if "/hooks/" not in path]
    documented = {re.sub(r"\{\w+\}", "{", m.group(1)) for m in re.finditer(r"^\| `\w+ ([^?`]+)", README, re.M)}
    assert "/v1/search" in paths
    missing = [path for path in paths if path not in documented]
    assert not missing, f"undocumented endpoints: {missing}"
