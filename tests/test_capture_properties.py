"""Property tests for capture over HTTP: any JSON shaped roughly like an AgentMessage is stored or refused.

The host hands the engine whatever its transcript holds: deep nesting, huge strings, odd unicode (JavaScript
strings may hold lone surrogates), nulls and wrong types. Sent to ``commit-turn`` or ``ingest`` of a live
sidecar, such a value is either stored, with a derived text and its original, or refused with 422 in the
standard shape, and a refusal writes nothing at all (the database's fingerprint is unchanged). A success
stores the whole request: every message sent, in order, but one that has the identity of a message stored
before it (``store/sqlite/messages.py``: content, or for an undated message of a turn, the turn's key and its
place). Each session here is new, so those are exactly the dated repeats within a turn, or any repeat
within an ingest; and a message with text gets a non-empty derived text.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openclaw_lossless.capture.records import dated
from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.config import Settings
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, db_fingerprint, live_sidecar, make_settings
from tests.reliability import record

pytestmark = pytest.mark.slow

# Every code point, lone surrogates included (Hypothesis leaves category Cs out unless told).
ODD_CHARS = st.characters(exclude_categories=())
ODD_TEXT = st.text(ODD_CHARS, max_size=40) | st.sampled_from(["", "\ud83d", "\udc00x", "\x00", "\u202e", "e\u0301"])
HUGE_TEXT = st.builds(lambda char, n: char * n, ODD_CHARS, st.integers(10_000, 300_000))
NUMBERS = st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
SCALARS = st.none() | st.booleans() | NUMBERS | ODD_TEXT
JSON = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4), max_leaves=12
)
ROLES = st.sampled_from(["user", "assistant", "toolResult", "bashExecution", "compactionSummary", "system", "x-y_1"])
BLOCK_TYPES = st.sampled_from(["text", "toolCall", "image", "thinking", "unknown"]) | ODD_TEXT


def _nested(depth: int, leaf: Any) -> Any:
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


DEEP = st.builds(_nested, st.integers(50, 300), SCALARS)  # deeper ones: see the parametrized test below
VALUES = JSON | HUGE_TEXT | DEEP
BLOCKS = st.fixed_dictionaries(
    {"type": BLOCK_TYPES},
    optional={"text": VALUES, "name": VALUES, "arguments": VALUES, "thinking": VALUES, "mimeType": VALUES},
)
CONTENT = VALUES | st.lists(BLOCKS | VALUES, max_size=5) | BLOCKS
MESSAGES = st.fixed_dictionaries(
    {"role": st.integers(0, 9).flatmap(lambda n: SCALARS if n == 0 else ROLES)},  # mostly a real role
    optional={
        "content": CONTENT,
        "timestamp": SCALARS | st.sampled_from([1_767_225_600_000, "2026-01-01T00:00:00Z", 1e300, -1]),
        "toolName": VALUES,
        "summary": VALUES,
        "command": VALUES,
        "output": VALUES,
        "extra": VALUES,
    },
)
ANY_MESSAGE = st.integers(0, 9).flatmap(lambda n: VALUES if n == 0 else MESSAGES)  # mostly an object

_sessions = itertools.count()
OUTCOMES: Counter[str] = Counter()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSidecar]:
    settings_ = make_settings(tmp_path_factory.mktemp("capture") / "state", max_body_bytes=8 * 1024 * 1024)
    with live_sidecar(settings_, HashEmbedder()) as live:
        yield live
    record("captureProperties", {"requests": sum(OUTCOMES.values()), **OUTCOMES, "5xx": OUTCOMES["5xx"]})


def _fingerprint(settings: Settings) -> dict[str, Any]:
    """The store's content (either backend), minus the embedding backlog the background worker drains itself."""
    fingerprint = db_fingerprint(settings)
    fingerprint["counts"].pop("embedding_backlog", None)
    return fingerprint


def _post(server: LiveSidecar, hook: str, body: dict[str, Any]) -> httpx.Response:
    """Sent as JavaScript's JSON.stringify would: ASCII escapes, so lone surrogates travel as they are."""
    return server.client.post(
        f"/v1/hooks/{hook}", content=json.dumps(body, ensure_ascii=True), headers={"Content-Type": "application/json"}
    )


def _stored_or_refused(server: LiveSidecar, hook: str, body: dict[str, Any], sent: list[Any]) -> None:
    before = _fingerprint(server.settings)
    response = _post(server, hook, body)
    OUTCOMES[f"{hook} {response.status_code}" if response.status_code < 500 else "5xx"] += 1
    if response.status_code != 200:
        assert_error(response, 422, "invalid_request")
        assert _fingerprint(server.settings) == before
        return
    stored = server.client.get(f"/v1/sessions/{body['sessionId']}/messages", params={"last": 10_000})
    assert stored.status_code == 200, stored.text
    kept = stored.json()["messages"]
    expected = _what_a_new_session_stores(hook, sent)
    stored_originals = [_identity(m["original"]) for m in kept]
    assert stored_originals == [_identity(REDACTOR.redact_value(m)) for m in expected], "a partial or extra write"
    for message, original in zip(kept, expected, strict=True):
        assert isinstance(message["text"], str)
        assert message["text"] or not _has_text(original), f"no derived text for a message with text: {original!r}"


# Stored originals are redacted (the default); the oracle redacts what it sent the same way. Random text
# practically never looks like a secret, but if it did, the stored original would rightly differ.
REDACTOR = build_redactor()


def _identity(message: Any) -> str:
    """A message's content to compare: JSON with sorted keys, so 1, 1.0 and true stay different."""
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _what_a_new_session_stores(hook: str, sent: list[Any]) -> list[Any]:
    """The messages kept, in order: each but a repeat of the content of one kept before it, where content
    is the identity (ingest, and a dated message of a turn; an undated one is the only one at its place)."""
    seen: set[str] = set()
    kept = []
    for message in sent:
        content = _identity(REDACTOR.redact_value(message))
        if hook == "commit-turn" and not dated(message):
            kept.append(message)
        elif content not in seen:
            seen.add(content)
            kept.append(message)
    return kept


def _has_text(message: dict[str, Any]) -> bool:
    """Whether a person reading the message would see text: a string where the host puts what was said."""
    content = message.get("content")
    blocks = content if isinstance(content, list) else [content]
    said = [*blocks, *(b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text")]
    if message["role"] in ("compactionSummary", "branchSummary"):
        said = [message.get("summary")]
    if message["role"] == "bashExecution":
        said = [message.get("command"), message.get("output")]
    return any(isinstance(value, str) and value for value in said)


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(messages=st.lists(ANY_MESSAGE, min_size=1, max_size=4))
def test_any_turn_is_stored_with_a_text_or_refused_with_422(server: LiveSidecar, messages: list[Any]) -> None:
    session = f"s-prop-{next(_sessions)}"
    body = {"sessionId": session, "advancementKey": f"{session}:1", "messages": messages}
    _stored_or_refused(server, "commit-turn", body, messages)


@settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(message=ANY_MESSAGE)
def test_any_ingested_message_is_stored_with_a_text_or_refused_with_422(server: LiveSidecar, message: Any) -> None:
    session = f"s-prop-{next(_sessions)}"
    _stored_or_refused(server, "ingest", {"sessionId": session, "message": message}, [message])


@pytest.mark.parametrize("depth", [65, 500, 5000, 100_000])
def test_deeply_nested_messages_are_refused_with_422_never_a_500(server: LiveSidecar, depth: int) -> None:
    """Written by hand: Python's own json.dumps cannot even build these bodies (it recurses)."""
    nested = '{"k":[' * (depth // 2) + '"leaf"' + "]}" * (depth // 2)
    message = '{"role":"user","content":"deep","extra":' + nested + "}"
    for hook, body in [
        ("commit-turn", '{"sessionId":"s-deep","advancementKey":"k-deep","messages":[' + message + "]}"),
        ("ingest", '{"sessionId":"s-deep","message":' + message + "}"),
        ("assemble", '{"sessionId":"s-deep","messages":[' + message + "]}"),
    ]:
        before = _fingerprint(server.settings)
        response = server.client.post(f"/v1/hooks/{hook}", content=body, headers={"Content-Type": "application/json"})
        assert_error(response, 422, "invalid_request")
        assert "nested" in response.json()["error"]["message"] or depth > 1000
        assert _fingerprint(server.settings) == before
