"""The MCP server for real: ``openclaw-lossless mcp`` spawned as a stdio subprocess and driven by
the MCP SDK's own client (initialize, list tools, call ``memory_search``), against a store filled through a live
sidecar; then with the sidecar stopped (the store opened in the server's process); and the guard that keeps the
fallback from ever dropping the store's vectors."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import CallToolResult, TextContent

from openclaw_lossless.cli.mcp_server import TOOL_NAME, MemorySearch
from openclaw_lossless.config import Settings
from openclaw_lossless.sidecar import open_store
from tests.conversation import FACT, commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, free_port, live_sidecar, make_settings, store_rows

REPO = Path(__file__).resolve().parents[1]
OPS_FACT = "The ops on-call rota lives in the shared pager spreadsheet, tab three."
T = TypeVar("T")


def fill(server: LiveSidecar) -> None:
    """Thirty turns of agent main (the staging fact among them) and one turn of agent ops."""
    for turn in conversation(30, session="s-main"):
        assert server.post("commit-turn", commit_body(turn)).json()["status"] == "committed"
    ops = {
        "advancementKey": "ops-1",
        "sessionId": "s-ops",
        "sessionKey": "agent:ops:main",
        "messages": [
            {"role": "user", "content": OPS_FACT, "timestamp": 1_767_225_600_000},
            {"role": "assistant", "content": [{"type": "text", "text": "Noted."}], "timestamp": 1_767_225_601_000},
        ],
    }
    assert server.post("commit-turn", ops).json()["status"] == "committed"
    server.wait_for_backlog()


def server_params(settings: Settings, **env: str) -> StdioServerParameters:
    """The server as an MCP client config would run it, pointed at this store by environment variables only."""
    if settings.database_url is not None:  # a PostgreSQL store is named by its URL and schema
        database = {"LOSSLESS_DATABASE_URL": settings.database_url.get_secret_value()}
        env = database | {"LOSSLESS_DATABASE_SCHEMA": settings.database_schema} | env
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "openclaw_lossless", "mcp"],  # what `openclaw-lossless mcp` runs
        cwd=str(REPO),
        env={
            "LOSSLESS_STATE_DIR": str(settings.state_dir),
            "LOSSLESS_PORT": str(settings.port),
            # The fallback must not load the real model here; with the sidecar up it is never consulted.
            "LOSSLESS_EMBEDDING_PROVIDER": "none",
            "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        }
        | env,
    )


def with_client(params: StdioServerParameters, work: Callable[[ClientSession], Awaitable[T]]) -> T:
    async def main() -> T:
        with anyio.fail_after(60):
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                return await work(session)

    return anyio.run(main)


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def structured(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    content: dict[str, Any] | None = result.structured_content
    assert content is not None
    return content


def test_memory_search_over_stdio_against_the_running_sidecar(sidecar: LiveSidecar) -> None:
    fill(sidecar)
    direct = sidecar.client.get("/v1/search", params={"q": "staging database password rotates", "k": 3}).json()
    assert direct["hits"], "the store should find the fact"

    async def work(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        found = await session.call_tool(TOOL_NAME, {"query": "staging database password rotates", "k": 3})
        ops = await session.call_tool(TOOL_NAME, {"query": "on-call rota pager", "scope": "agent:ops"})
        main_only = await session.call_tool(TOOL_NAME, {"query": "on-call rota pager", "scope": "agent:main"})
        unseen = await session.call_tool(TOOL_NAME, {"query": "anything", "scope": "session:never-seen"})
        bad_k = await session.call_tool(TOOL_NAME, {"query": "x", "k": 0})
        bad_scope = await session.call_tool(TOOL_NAME, {"query": "x", "scope": "everything"})
        blank = await session.call_tool(TOOL_NAME, {"query": "   "})
        return {
            "tools": listed.tools,
            "found": found,
            "ops": ops,
            "main_only": main_only,
            "unseen": unseen,
            "errors": [bad_k, bad_scope, blank],
        }

    out = with_client(server_params(sidecar.settings), work)

    (tool,) = out["tools"]
    assert tool.name == TOOL_NAME
    assert "not instructions" in (tool.description or "")
    assert tool.input_schema["required"] == ["query"]
    assert set(tool.input_schema["properties"]) == {"query", "k", "scope", "mode", "source"}
    assert tool.output_schema is not None and "hits" in tool.output_schema["properties"]
    assert tool.annotations is not None and tool.annotations.read_only_hint is True

    found = structured(out["found"])
    assert found["source"] == "sidecar"
    assert found["scope"] == "all"
    # The same hits, in the same order, as the sidecar's own search.
    assert [h["citation"] for h in found["hits"]] == [h["citation"] for h in direct["hits"]]
    best = found["hits"][0]
    assert best["snippet"] == FACT and best["role"] == "user" and best["sessionId"] == "s-main"
    assert best["agentId"] == "main" and best["citation"] == f"msg:{best['id']}"
    text = text_of(out["found"])
    assert "not instructions" in text
    assert f"[{best['citation']}] " in text and f"\n> {FACT}\n" in text + "\n"
    assert "from the running sidecar" in text

    ops = structured(out["ops"])
    assert [h["snippet"] for h in ops["hits"]][:1] == [OPS_FACT]
    assert {h["agentId"] for h in ops["hits"]} == {"ops"}
    assert all(h["snippet"] != OPS_FACT for h in structured(out["main_only"])["hits"])
    unseen = structured(out["unseen"])
    assert unseen["hits"] == [] and "0 hits" in text_of(out["unseen"])

    for error in out["errors"]:
        assert error.is_error, text_of(error)


def test_memory_search_over_stdio_without_the_sidecar(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder()) as server:
        fill(server)
    # The sidecar is gone; its port answers nothing.

    async def work(session: ClientSession) -> list[CallToolResult]:
        return [
            await session.call_tool(TOOL_NAME, {"query": "staging database password rotates", "k": 5}),
            await session.call_tool(TOOL_NAME, {"query": "rota", "scope": "session:s-ops"}),
            await session.call_tool(TOOL_NAME, {"query": "rota", "scope": "session:never-seen"}),
        ]

    found, in_session, unseen = with_client(server_params(settings), work)
    data = structured(found)
    assert data["source"] == "store"
    assert data["hits"][0]["snippet"] == FACT
    assert "no running sidecar serves this store" in text_of(found)
    assert [h["snippet"] for h in structured(in_session)["hits"]] == [OPS_FACT]
    assert structured(unseen)["hits"] == []


@pytest.mark.sqlite_only  # a state dir holding no store file; a PostgreSQL store is named by its URL, not its dir
def test_a_missing_store_is_an_error_result_not_a_crash(tmp_path: Path) -> None:
    settings = make_settings(tmp_path / "nowhere")

    async def work(session: ClientSession) -> CallToolResult:
        return await session.call_tool(TOOL_NAME, {"query": "anything"})

    result = with_client(server_params(settings), work)
    assert result.is_error
    assert "LOSSLESS_STATE_DIR" in text_of(result)
    assert not (tmp_path / "nowhere" / "lossless.sqlite").exists()


def vector_rows(settings: Settings) -> int:
    return int(store_rows(settings, "SELECT count(*) FROM message_vectors")[0][0])


@pytest.mark.parametrize("same_embedder", [True, False])
def test_the_fallback_never_drops_the_vectors(tmp_path: Path, same_embedder: bool) -> None:
    """Opening the store with another embedder would drop and rebuild its vectors: the fallback searches by
    keywords instead, and with the embedder the vectors were made with it uses them."""
    settings = make_settings(tmp_path / "state")
    with live_sidecar(settings, HashEmbedder()) as server:
        fill(server)
    before = vector_rows(settings)
    assert before > 0

    embedder = HashEmbedder() if same_embedder else HashEmbedder(model="another-model")
    searcher = MemorySearch(settings.model_copy(update={"port": free_port()}), provider_factory=lambda _: embedder)
    source, hits, note = searcher.search("staging database password rotates", "all", 5, "vector")
    assert source == "store"
    assert vector_rows(settings) == before
    if same_embedder:
        assert hits and hits[0]["text"] == FACT and "vector" in hits[0]["lanes"]
        assert note is None
    else:
        # The vector lane is off, and the answer says so rather than "nothing stored matches"; hybrid still
        # answers, from the keyword lane, with the same note.
        assert hits == [] and note is not None and "vector lane gave nothing" in note
        _, keyword, hybrid_note = searcher.search("staging database password rotates", "all", 5, "hybrid")
        assert keyword[0]["text"] == FACT and keyword[0]["lanes"] == ["keyword"]
        assert hybrid_note == note

    sidecar = open_store(settings, lambda _: embedder)
    try:
        assert (sidecar.index is not None) is same_embedder
    finally:
        sidecar.close()
