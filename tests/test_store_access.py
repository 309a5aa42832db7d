"""The CLI and the MCP server use the running sidecar only for the store it serves; any other store's file is
opened directly, and its token is never sent to a sidecar that serves something else.

Two real stores in temp dirs, each with its own token; a real sidecar serves store A over real HTTP while
the commands name store B (by ``--db-path`` or by ``--state-dir``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import ClassVar

import pytest

from openclaw_lossless.api.identity import file_id
from openclaw_lossless.cli.main import main
from openclaw_lossless.cli.mcp_server import MemorySearch
from tests.helpers import LiveSidecar, live_sidecar, make_settings

FACT_A = "The lighthouse keeper on store A feeds the gulls at dawn."
FACT_B = "The lighthouse keeper on store B paints the railings blue."


def commit(server: LiveSidecar, session: str, text: str) -> None:
    body = {
        "sessionId": session,
        "sessionKey": "agent:main:main",
        "advancementKey": f"{session}-1",
        "messages": [{"role": "user", "content": text, "timestamp": 1_767_225_600_000}],
    }
    assert server.post("commit-turn", body).json()["status"] == "committed"


@pytest.fixture
def two_stores(tmp_path: Path) -> Iterator[tuple[LiveSidecar, Path]]:
    """Store B written and closed; store A served for the length of the test."""
    with live_sidecar(make_settings(tmp_path / "b", embedding_provider="none"), None) as other:
        commit(other, "s-b", FACT_B)
    with live_sidecar(make_settings(tmp_path / "a", embedding_provider="none"), None) as served:
        commit(served, "s-a", FACT_A)
        yield served, tmp_path / "b"


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.sqlite_only
def test_the_identity_names_the_file_served_not_the_path(tmp_path: Path, sidecar: LiveSidecar) -> None:
    database = sidecar.settings.database_path
    linked = tmp_path / "same-file.sqlite"
    linked.hardlink_to(database)
    copy = tmp_path / "a-copy.sqlite"
    copy.write_bytes(database.read_bytes())
    assert file_id(linked) == file_id(database) is not None
    assert file_id(copy) != file_id(database)
    assert file_id(tmp_path / "nothing.sqlite") is None


@pytest.mark.sqlite_only  # two stores named by their files (--db-path, --state-dir)
def test_search_and_stats_with_db_path_answer_from_that_file(
    capsys: pytest.CaptureFixture[str], two_stores: tuple[LiveSidecar, Path]
) -> None:
    served, other = two_stores
    port = str(served.settings.port)
    # A's state dir and token, B's database file: the sidecar (which holds A) must not answer.
    named = ["--state-dir", str(served.settings.state_dir), "--db-path", str(other / "lossless.sqlite"), "--port", port]
    code, out, err = cli(capsys, "search", "lighthouse keeper", "--mode", "keyword", "--json", *named)
    assert code == 0, err
    assert [hit["text"] for hit in json.loads(out)["hits"]] == [FACT_B]
    code, out, err = cli(capsys, "stats", "--json", *named)
    assert code == 0, err
    assert json.loads(out)["messages"] == 1 and json.loads(out)["sessions"] == 1
    # The served store itself still goes to the sidecar, which holds A.
    code, out, err = cli(capsys, "search", "lighthouse", "--mode", "keyword", "--json", "--state-dir",
                         str(served.settings.state_dir), "--port", port)  # fmt: skip
    assert code == 0, err
    assert [hit["text"] for hit in json.loads(out)["hits"]] == [FACT_A]


@pytest.mark.sqlite_only  # two stores named by their files (--db-path, --state-dir)
def test_another_state_dir_answers_from_its_own_file_not_with_a_token_error(
    capsys: pytest.CaptureFixture[str], two_stores: tuple[LiveSidecar, Path]
) -> None:
    served, other = two_stores
    named = ["--state-dir", str(other), "--port", str(served.settings.port)]
    code, out, err = cli(capsys, "search", "lighthouse keeper", "--mode", "keyword", "--json", *named)
    assert code == 0, err
    assert [hit["text"] for hit in json.loads(out)["hits"]] == [FACT_B]
    code, out, err = cli(capsys, "forget", "--session", "s-b", "--dry-run", "--json", *named)
    assert code == 0, err
    assert json.loads(out)["forgotten"] == 1


@pytest.mark.sqlite_only  # two stores named by their files (--db-path, --state-dir)
def test_the_mcp_server_searches_the_store_it_was_given(two_stores: tuple[LiveSidecar, Path]) -> None:
    served, other = two_stores
    given = make_settings(other, embedding_provider="none", port=served.settings.port)
    source, hits, _ = MemorySearch(given).search("lighthouse keeper", "all", 5, "keyword")
    assert source == "store" and [hit["text"] for hit in hits] == [FACT_B]
    source, hits, _ = MemorySearch(served.settings).search("lighthouse keeper", "all", 5, "keyword")
    assert source == "sidecar" and [hit["text"] for hit in hits] == [FACT_A]


class Impostor(BaseHTTPRequestHandler):
    """Claims to be a sidecar serving the store, without the token's proof; records every header it is sent."""

    store: ClassVar[str | None] = None
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Impostor.seen.extend(f"{k}: {v}" for k, v in self.headers.items())
        body = json.dumps({"service": "openclaw-lossless", "pid": 1, "store": Impostor.store, "proof": "0" * 64})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        return


@pytest.mark.sqlite_only  # two stores named by their files (--db-path, --state-dir)
def test_the_token_is_never_sent_to_a_program_that_cannot_prove_it_holds_it(
    capsys: pytest.CaptureFixture[str], two_stores: tuple[LiveSidecar, Path]
) -> None:
    _, other = two_stores
    token = (other / "token").read_text().strip()
    Impostor.store, Impostor.seen = file_id(other / "lossless.sqlite"), []
    impostor = ThreadingHTTPServer(("127.0.0.1", 0), Impostor)
    Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        port = str(impostor.server_address[1])
        code, out, err = cli(capsys, "stats", "--json", "--state-dir", str(other), "--port", port)
    finally:
        impostor.shutdown()
    assert code == 0, err
    assert json.loads(out)["messages"] == 1  # answered from B's file
    assert Impostor.seen, "the impostor was asked who it is"
    assert not [header for header in Impostor.seen if token in header or "authorization" in header.lower()]
