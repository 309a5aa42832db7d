"""The CLI's queries answer alike whether they reach the running sidecar or open the database file.

Each test runs twice: once with the sidecar answering on its port, once with a port nobody listens on (the
file path). The store holds two agents' sessions embedded by the real local model, so the file path (which
builds its own embedder from the settings) finds the same vectors the sidecar wrote.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.cli.main import main
from openclaw_lossless.config import Settings
from openclaw_lossless.embed.local import LocalEmbedder
from openclaw_lossless.store.sqlite.vectors import TABLE
from tests.conversation import FACT, commit_body, conversation
from tests.helpers import live_sidecar, make_settings, schema_of, store_rows

NOBODY = 9  # the discard port: no sidecar answers, so the CLI opens the file
PATHS = ["sidecar", "file"]
PLUS_TWO = timezone(timedelta(hours=2))


@dataclass(frozen=True)
class Store:
    state_dir: Path
    port: int


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory, local_embedder: LocalEmbedder) -> Iterator[Store]:
    """Agent main (s-main) and agent ops (s-ops) each told the fact; the sidecar keeps running."""
    state_dir = tmp_path_factory.mktemp("cli-input") / "state"
    with live_sidecar(make_settings(state_dir), local_embedder) as server:
        for turn in conversation(6):
            server.post("commit-turn", commit_body(turn))
        for turn in conversation(6, session="s-ops", seed=5):
            server.post("commit-turn", commit_body(turn, session="s-ops", key="agent:ops:main"))
        server.wait_for_backlog()
        yield Store(state_dir, server.settings.port)


def run(capsys: pytest.CaptureFixture[str], store: Store, path: str, *args: str) -> tuple[int, str, str]:
    port = store.port if path == "sidecar" else NOBODY
    try:
        with schema_of(store.state_dir):
            code = main([*args, "--state-dir", str(store.state_dir), "--port", str(port)])
    except SystemExit as exited:  # argparse refuses before any command runs
        code = int(exited.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def hits(capsys: pytest.CaptureFixture[str], store: Store, path: str, *args: str) -> list[dict[str, Any]]:
    code, out, err = run(capsys, store, path, "search", *args, "--json")
    assert code == 0, err
    found: list[dict[str, Any]] = json.loads(out)["hits"]
    return found


BAD_INPUT = [
    ("search", "password", "-k", "-1"),
    ("search", "password", "-k", "0"),
    ("search", "password", "-k", "201"),
    ("search", "   "),
    ("search", "password", "--session", "no-such-session"),
    ("search", "password", "--since", "2026-13-01"),
    ("search",),
    ("pack", "--query", "password", "--budget-tokens", "-5"),
    ("recover", "--last", "-1"),
    ("recover", "--before-compaction", "-1"),
    ("recover", "--session", "no-such-session"),
    ("prune", "--dry-run", "--max-db-size-mb", "-1"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("args", BAD_INPUT, ids=" ".join)
def test_bad_input_is_refused_alike_on_both_paths(
    capsys: pytest.CaptureFixture[str], store: Store, path: str, args: tuple[str, ...]
) -> None:
    code, out, err = run(capsys, store, path, *args)
    assert code == 2, (out, err)
    assert err.count("\n") == 1 and err.startswith("openclaw-lossless") and "usage:" not in err, err
    assert out == ""


@pytest.mark.parametrize("path", PATHS)
def test_since_and_until_honour_an_offset_and_a_time_without_one_is_utc(
    capsys: pytest.CaptureFixture[str], store: Store, path: str
) -> None:
    query = ("staging database password", "--mode", "keyword", "--session", "s-main")
    [fact] = [h for h in hits(capsys, store, path, *query) if h["text"] == FACT]
    said = datetime.fromtimestamp(int(fact["createdAt"]), UTC)  # a whole second, at or before the message
    in_plus_two = said.astimezone(PLUS_TWO)
    assert FACT in texts(hits(capsys, store, path, *query, "--since", in_plus_two.isoformat()))
    assert FACT in texts(hits(capsys, store, path, *query, "--since", said.replace(tzinfo=None).isoformat()))
    # The same wall-clock time without its offset is read as UTC: two hours after the message.
    wall_clock = in_plus_two.replace(tzinfo=None).isoformat()
    assert FACT not in texts(hits(capsys, store, path, *query, "--since", wall_clock))
    before = (in_plus_two - timedelta(seconds=1)).isoformat()
    assert FACT not in texts(hits(capsys, store, path, *query, "--until", before))
    # A date alone is that whole day, up to its last moment.
    assert FACT in texts(hits(capsys, store, path, *query, "--until", said.date().isoformat()))
    assert FACT not in texts(
        hits(capsys, store, path, *query, "--until", (said.date() - timedelta(days=1)).isoformat())
    )


def texts(found: list[dict[str, Any]]) -> list[str]:
    return [hit["text"] for hit in found]


@pytest.mark.parametrize("path", PATHS)
def test_agent_limits_the_search_to_that_agents_sessions(
    capsys: pytest.CaptureFixture[str], store: Store, path: str
) -> None:
    everyone = hits(capsys, store, path, "staging database password", "-k", "20")
    assert {h["agentId"] for h in everyone} == {"main", "ops"}
    ops = hits(capsys, store, path, "staging database password", "--agent", "ops", "-k", "20")
    assert ops and {(h["agentId"], h["sessionId"]) for h in ops} == {("ops", "s-ops")}
    assert FACT in texts(ops)
    assert hits(capsys, store, path, "staging database password", "--agent", "nobody") == []


@pytest.mark.parametrize("path", PATHS)
def test_vector_mode_finds_a_paraphrase_by_its_meaning_alone(
    capsys: pytest.CaptureFixture[str], store: Store, path: str
) -> None:
    paraphrase = "which weekday do we change the secret for the test environment"
    found = hits(capsys, store, path, paraphrase, "--mode", "vector", "--agent", "main", "-k", "3")
    assert found and all(h["lanes"] == ["vector"] and h["cosine"] is not None for h in found)
    assert FACT in texts(found)


def test_a_search_on_the_file_with_another_models_settings_leaves_the_vectors_alone(
    capsys: pytest.CaptureFixture[str], store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the store with an embedder other than the one its vectors were made with drops and rebuilds
    them: a search run with the other variant's settings would have wiped every vector the sidecar made. It
    searches keywords alone, and says so: the user asked for a model, so no vector hit is not "no match"."""
    other = "fp32" if Settings().local_variant == "int8" else "int8"
    monkeypatch.setenv("LOSSLESS_LOCAL_VARIANT", other)
    before = vector_count(store)
    code, out, err = run(capsys, store, "file", "search", "staging database password", "--mode", "hybrid", "--json")
    answer = json.loads(out)
    assert code == 0 and FACT in texts(answer["hits"]) and all(hit["lanes"] == ["keyword"] for hit in answer["hits"])
    assert answer["lanesRan"] == ["keyword"] and answer["skipped"] == "vector_unavailable"
    code, out, err = run(capsys, store, "file", "search", "which weekday do we change it", "--mode", "vector")
    assert code == 0 and "note: the vector lane gave nothing" in err
    assert vector_count(store) == before > 0


def vector_count(store: Store) -> int:
    return int(store_rows(make_settings(store.state_dir), f"SELECT count(*) FROM {TABLE}")[0][0])
