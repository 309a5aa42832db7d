"""Bad input changes nothing: malformed bodies get 422, oversized 413, missing or wrong tokens 401."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conversation import commit_body, conversation
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, db_fingerprint, live_sidecar, make_settings

pytestmark = pytest.mark.slow  # minutes of the fast loop: make check leaves it to make test

MANIFEST = json.loads((Path(__file__).parents[1] / "plugin-manifest.json").read_text())
HOOK_PATHS = [hook["path"] for hook in MANIFEST["hooks"].values()]
GOOD = {"sessionId": "s", "sessionKey": "agent:main:main"}

MALFORMED: list[tuple[str, Any]] = [
    ("/v1/hooks/commit-turn", {"sessionId": "s", "messages": []}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "k", "messages": "not a list"}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "k", "messages": [{"content": "no role"}]}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "k", "messages": [{"role": "user"}, 42]}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "", "messages": []}),
    ("/v1/hooks/commit-turn", {"sessionId": "s", "sessionKey": "not-a-key", "advancementKey": "k", "messages": []}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "k", "messages": [], "config": {"windowShare": 7}}),
    ("/v1/hooks/commit-turn", GOOD | {"advancementKey": "k", "messages": [], "config": {"bogus": 1}}),
    ("/v1/hooks/ingest", GOOD | {"message": []}),
    ("/v1/hooks/ingest-batch", GOOD | {"messages": [{"role": 3}]}),
    ("/v1/hooks/after-turn", GOOD | {"messages": None}),
    ("/v1/hooks/assemble", GOOD | {"messages": [], "descriptors": []}),
    ("/v1/hooks/assemble", GOOD | {"tokenBudget": -5}),
    ("/v1/hooks/assemble", GOOD | {"config": {"recencyFloor": 1.5}}),
    ("/v1/hooks/assemble", GOOD | {"config": {"neighbourRadius": -1}}),
    ("/v1/hooks/assemble", GOOD | {"config": {"recallTokenBudget": "lots"}}),
    ("/v1/hooks/assemble", {"sessionKey": "agent:main:main"}),
    ("/v1/hooks/assemble", GOOD | {"descriptors": [{"role": "user"}]}),
    ("/v1/hooks/bootstrap", {"sessionId": ""}),
    ("/v1/hooks/bootstrap", {"sessionId": "s\u0001"}),
    ("/v1/hooks/compact", GOOD | {"tokensBefore": "many"}),
    ("/v1/hooks/subagent-spawn", {"parentSessionKey": "agent:main:main"}),
    ("/v1/hooks/subagent-spawn", {"parentSessionKey": "agent:main:main", "childSessionKey": "../etc"}),
    ("/v1/hooks/subagent-spawn/rollback", {}),
    ("/v1/hooks/subagent-ended", {"reason": "completed"}),
]


@pytest.fixture
def seeded(tmp_path: Path) -> Any:
    settings = make_settings(tmp_path / "state", max_body_bytes=64 * 1024)
    with live_sidecar(settings, HashEmbedder()) as server:
        for turn in conversation(3):
            server.post("commit-turn", commit_body(turn))
        server.wait_for_backlog()
        yield server, db_fingerprint(settings)


@pytest.mark.parametrize(("path", "body"), MALFORMED)
def test_malformed_bodies_get_422_and_write_nothing(seeded: tuple[LiveSidecar, Any], path: str, body: Any) -> None:
    server, before = seeded
    assert_error(server.client.post(path, json=body), 422, _expected_code(body))
    assert db_fingerprint(server.settings) == before


def _expected_code(body: Any) -> str:
    keys = (body.get("sessionKey"), body.get("childSessionKey"))
    return "invalid_session_key" if "not-a-key" in keys or "../etc" in keys else "invalid_request"


@pytest.mark.parametrize("path", HOOK_PATHS)
def test_every_hook_rejects_non_json_and_non_objects(seeded: tuple[LiveSidecar, Any], path: str) -> None:
    server, before = seeded
    raw = server.client.post(path, content=b"{not json", headers={"Content-Type": "application/json"})
    assert_error(raw, 422, "invalid_request")
    assert_error(server.client.post(path, json=[1, 2]), 422, "invalid_request")
    assert db_fingerprint(server.settings) == before


@pytest.mark.parametrize("path", HOOK_PATHS)
def test_every_hook_refuses_oversized_bodies_with_413(seeded: tuple[LiveSidecar, Any], path: str) -> None:
    server, before = seeded
    huge = GOOD | {"advancementKey": "big", "messages": [{"role": "user", "content": "x" * 100_000}]}
    assert_error(server.client.post(path, json=huge), 413, "payload_too_large")

    def chunks() -> Any:
        yield json.dumps(huge).encode()

    assert_error(server.client.post(path, content=chunks()), 413, "payload_too_large")
    assert db_fingerprint(server.settings) == before


@pytest.mark.parametrize("path", [*HOOK_PATHS, "/stats", "/v1/search?q=x", "/v1/sessions/s-main/messages"])
@pytest.mark.parametrize("authorization", [None, "Bearer wrong-token", "Bearer", "Basic dXNlcjpwYXNz"])
def test_every_endpoint_but_healthz_needs_the_token(
    seeded: tuple[LiveSidecar, Any], path: str, authorization: str | None
) -> None:
    server, before = seeded
    headers = {} if authorization is None else {"Authorization": authorization}
    method = "GET" if path.startswith(("/stats", "/v1/search", "/v1/sessions")) else "POST"
    body = commit_body(conversation(1)[0]) | {"advancementKey": "sneaky"}
    response = httpx.request(method, server.url + path, headers=headers, json=body if method == "POST" else None)
    assert_error(response, 401, "unauthorized")
    assert db_fingerprint(server.settings) == before
    assert httpx.get(server.url + "/healthz").status_code == 200


def test_unknown_routes_and_sessions_have_the_error_shape(seeded: tuple[LiveSidecar, Any]) -> None:
    server, _ = seeded
    assert_error(server.client.get("/v1/nope"), 404, "not_found")
    assert_error(server.client.get("/v1/sessions/unknown/messages"), 404, "not_found")
    assert_error(server.client.get("/v1/search", params={"q": "x", "scope": "planet:mars"}), 422, "invalid_request")
    assert_error(server.client.get("/v1/search", params={"q": ""}), 422, "invalid_request")


def test_lone_surrogates_from_javascript_are_stored_or_refused_never_a_500(seeded: tuple[LiveSidecar, Any]) -> None:
    seeded_server, _ = seeded

    class Escaped:
        """Sends JSON with ASCII escapes, as JavaScript's JSON.stringify does for a lone surrogate."""

        client = seeded_server.client

        def post(self, hook: str, body: dict[str, Any]) -> httpx.Response:
            return seeded_server.client.post(f"/v1/hooks/{hook}", content=json.dumps(body),
                                             headers={"Content-Type": "application/json"})  # fmt: skip

    server = Escaped()
    odd = "half an emoji \ud83d here"
    turn = {"advancementKey": "surrogate", "sessionId": "s-odd", "sessionKey": "agent:main:main",
            "messages": [{"role": "user", "content": odd, "timestamp": 1_700_000_000_000}]}  # fmt: skip
    assert server.post("commit-turn", turn).json()["status"] == "committed"
    stored = server.client.get("/v1/sessions/s-odd/messages").json()["messages"][0]
    assert stored["original"]["content"] == odd
    assert_error(server.post("compact", {"sessionId": "s-odd", "summary": odd}), 422, "invalid_request")
    bad_key = turn | {"advancementKey": "surrogate-2", "sessionKey": "agent:main:\ud83d"}
    assert_error(server.post("commit-turn", bad_key), 422, "invalid_request")
    bad_id = turn | {"advancementKey": "surrogate-3", "sessionId": "s-\ud83d"}
    assert_error(server.post("commit-turn", bad_id), 422, "invalid_request")


def test_a_timestamp_no_clock_holds_is_stored_as_undated_never_a_500(seeded: tuple[LiveSidecar, Any]) -> None:
    """JSON carries integers of any length; one no float can hold (400 digits) once failed the turn with a 500."""
    server, _ = seeded
    huge = "1" + "0" * 400
    ingest = {"sessionId": "s-huge", "sessionKey": "agent:main:main",
              "message": {"role": "user", "content": "a clockless note", "timestamp": "HUGE"}}  # fmt: skip
    commit = {"advancementKey": "huge-1", "sessionId": "s-huge", "sessionKey": "agent:main:main",
              "messages": [{"role": "user", "content": "another clockless note", "timestamp": "-HUGE"}]}  # fmt: skip
    bodies = {
        hook: json.dumps(body).replace('"HUGE"', huge).replace('"-HUGE"', "-" + huge)
        for hook, body in (("ingest", ingest), ("commit-turn", commit))
    }
    for hook, body in bodies.items():
        answer = server.client.post(f"/v1/hooks/{hook}", content=body, headers={"Content-Type": "application/json"})
        assert answer.status_code == 200, (hook, answer.text)
    texts = [m["text"] for m in server.client.get("/v1/sessions/s-huge/messages").json()["messages"]]
    assert texts == ["a clockless note", "another clockless note"]
