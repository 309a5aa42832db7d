"""Fuzzing the HTTP API with schemathesis, from the app's own OpenAPI schema, against a live sidecar.

Every operation gets schema-valid cases (``positive``) and schema-breaking ones (``negative``), a few hundred
in all (``LOSSLESS_FUZZ_POSITIVE`` / ``LOSSLESS_FUZZ_NEGATIVE``, default 200 + 100: about a minute and a half
on 2 shared cores; a quarter on the PostgreSQL pass), sent over real HTTP with the token to a sidecar whose
store already holds a conversation.
None may answer 5xx; every error must have the standard shape; a rejected write must leave the database as it
was; and a hook request the schema calls valid must succeed, or its success path would never be fuzzed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode

from openclaw_lossless.api import schemas
from openclaw_lossless.capture.records import CaptureOptions, capture
from openclaw_lossless.capture.redact import build_redactor
from openclaw_lossless.config import Settings
from openclaw_lossless.errors import BadRequest
from openclaw_lossless.store.model.sessions import agent_of, check_identifier
from tests.conversation import commit_body, conversation
from tests.fuzzing import Tally, app_schema, fuzz, has_inputs, operations
from tests.helpers import HashEmbedder, LiveSidecar, assert_error, db_fingerprint, live_sidecar, make_settings
from tests.reliability import record

POSITIVE = int(os.environ.get("LOSSLESS_FUZZ_POSITIVE", "200"))
NEGATIVE = int(os.environ.get("LOSSLESS_FUZZ_NEGATIVE", "100"))
PG_SHARE = 4  # the PostgreSQL pass asks a quarter as many: what it adds is the store's answers, not the shapes
SCHEMA = app_schema(Path(tempfile.gettempdir()) / "lossless-schema-only")
OPERATIONS = {op.label: op for op in operations(SCHEMA)}
CASES = [
    pytest.param(label, mode, id=f"{label}-{mode.value}")
    for label, op in OPERATIONS.items()
    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)
    if mode is GenerationMode.POSITIVE or has_inputs(op)
]
TALLIES: dict[str, dict[str, Tally]] = {}
# Writes whose schema-valid requests may still be refused, by what the store holds rather than by their shape:
# forgetting a citation, session or agent that is not stored is 404, a selection that selects nothing is 422.
REFUSED_BY_STORE = {"POST /v1/forget": {404, 422}}

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSidecar]:
    settings = make_settings(tmp_path_factory.mktemp("fuzz") / "state")
    with live_sidecar(settings, HashEmbedder()) as live:
        for turn in conversation(6):
            live.post("commit-turn", commit_body(turn))
        live.post("compact", {"sessionId": "s-main", "sessionKey": "agent:main:main"})
        yield live
    if sum(len(modes) for modes in TALLIES.values()) == len(CASES):  # a run of some (-k) would replace them
        record("fuzz", _figures())


def _figures() -> dict[str, Any]:
    per_endpoint = {
        label: {mode: tally.view() for mode, tally in modes.items()} for label, modes in sorted(TALLIES.items())
    }
    return {
        "tool": "schemathesis (Python API) on app.openapi(), live sidecar on 127.0.0.1",
        "examplesAsked": {"positive": POSITIVE, "negative": NEGATIVE},
        "endpoints": len(per_endpoint),
        "cases": sum(t["cases"] for modes in per_endpoint.values() for t in modes.values()),
        "5xx": sum(t["5xx"] for modes in per_endpoint.values() for t in modes.values()),
        "perEndpoint": per_endpoint,
    }


def _stable_fingerprint(settings: Settings) -> dict[str, Any]:
    """The store's content (either backend), minus the embedding backlog the background worker drains itself."""
    fingerprint = db_fingerprint(settings)
    fingerprint["counts"].pop("embedding_backlog", None)
    return fingerprint


def test_every_operation_of_the_live_app_is_fuzzed(server: LiveSidecar) -> None:
    served = server.client.get("/openapi.json").json()
    assert {path for path in served["paths"]} == {path for path in SCHEMA["paths"]}
    assert {label.split(" ", 1)[1] for label in OPERATIONS} == set(SCHEMA["paths"])


def test_errors_are_documented_with_their_real_shape() -> None:
    for path, methods in SCHEMA["paths"].items():
        for method, operation in methods.items():
            assert set(operation["responses"]) >= {"4XX", "5XX"}, (method, path)
            assert "422" not in operation["responses"], (method, path)
    assert "HTTPValidationError" not in SCHEMA["components"]["schemas"]


@pytest.mark.parametrize(("label", "mode"), CASES)
def test_fuzzed_requests_never_get_a_5xx_and_errors_have_the_standard_shape(
    server: LiveSidecar, label: str, mode: GenerationMode, store_backend: str
) -> None:
    operation = OPERATIONS[label]
    examples = POSITIVE if mode is GenerationMode.POSITIVE else NEGATIVE
    if store_backend == "postgresql":  # the shapes are the app's, fuzzed in full on the SQLite pass
        examples = max(20, examples // PG_SHARE)
    tally = TALLIES.setdefault(label, {}).setdefault(mode.value, Tally())
    settings = server.settings
    writes = operation.method.upper() == "POST"
    fuzz(
        operation,
        mode,
        server.url,
        server.token,
        examples,
        tally,
        (lambda: _stable_fingerprint(settings)) if writes else None,
    )
    assert tally.cases >= (min(examples, 20) if has_inputs(operation) else 1)
    assert not [status for status in tally.statuses if status >= 500]
    if mode is GenerationMode.POSITIVE and writes:
        allowed = REFUSED_BY_STORE.get(label, set())
        refused = {status: n for status, n in tally.statuses.items() if status >= 400 and status not in allowed}
        why = tally.refusals
        assert not refused, f"schema-valid requests refused: {refused} ({why}); state the rule in api/schemas.py"


@pytest.mark.parametrize(
    ("hook", "body"),
    [
        ("compact", '{"sessionId": "s-main", "tokensBefore": 9223372036854775808}'),
        ("compact", '{"sessionId": "s-main", "tokensAfter": 100000000000000000000000}'),
        ("subagent-spawn/rollback", '{"spawnId": 9223372036854775808}'),
        ("assemble", '{"sessionId": "s-main", "messages": [], "prompt": "staging", "now": NaN}'),
        ("assemble", '{"sessionId": "s-main", "messages": [], "prompt": "staging", "now": Infinity}'),
        (
            "assemble",
            '{"sessionId": "s", "descriptors": [{"role": "user", "key": "k", "tokens": 1, "timestamp": NaN}]}',
        ),
    ],
)
def test_numbers_sqlite_or_scoring_cannot_hold_are_refused(server: LiveSidecar, hook: str, body: str) -> None:
    """Found by the fuzzer: integers past 64 bits reached SQLite (a 500), NaN/Infinity silently emptied recall."""
    before = _stable_fingerprint(server.settings)
    response = server.client.post(f"/v1/hooks/{hook}", content=body, headers={"Content-Type": "application/json"})
    assert_error(response, 422, "invalid_request")
    assert _stable_fingerprint(server.settings) == before


def _accepts(check: Callable[[str], object]) -> Callable[[str], bool]:
    def accepts(value: str) -> bool:
        try:
            check(value)
        except BadRequest:
            return False
        return True

    return accepts


def _role_accepted(role: str) -> bool:
    return _accepts(lambda r: capture({"role": r}, CaptureOptions(build_redactor())))(role)


NO_SURROGATES = st.characters(exclude_categories=["Cs"])  # the one rule a portable pattern cannot state
NEAR_MISSES = st.sampled_from(["agent:", "agent:main:", "agent:a.b-c_d:", "agent::", "Agent:x:", "x", ":", " "])


@pytest.mark.parametrize(
    ("pattern", "accepted"),
    [
        pytest.param(schemas.SESSION_KEY_PATTERN, _accepts(agent_of), id="session-key"),
        pytest.param(schemas.PRINTABLE_PATTERN, _accepts(lambda v: check_identifier(v, "sessionId")), id="identifier"),
        pytest.param(schemas.ROLE_PATTERN, _role_accepted, id="role"),
    ],
)
def test_the_schema_states_exactly_the_rules_the_validators_enforce(
    pattern: str, accepted: Callable[[str], bool]
) -> None:
    """The fuzzer (and any client) learns the rules from these patterns; the validators enforce their own copy.

    ``fullmatch`` reads a pattern as JSON Schema does: ``$`` is the end of the string, never a final newline.
    Class escapes (``\\s``, ``\\d``, ``\\w``) are left out: JSON Schema's regexes and Python's give them
    different sets (U+0085 is whitespace to Python only), and the fuzzer read one where the server used the other.
    """
    assert not re.search(r"\\[sSdDwW]", pattern), "a class escape means different things to client and server"
    maximum = 512 if pattern != schemas.ROLE_PATTERN else None  # the schema's maxLength, beside the pattern
    text = st.text(NO_SURROGATES, max_size=600)

    near_misses = st.builds(str.__add__, NEAR_MISSES, text)

    @given(st.from_regex(pattern, fullmatch=True, alphabet=NO_SURROGATES) | near_misses | text)
    @example("agent:main:main\n")
    @example("agent:main:\x85x")
    @example("user\n")
    def agree(value: str) -> None:
        stated = re.fullmatch(pattern, value) is not None and (maximum is None or len(value) <= maximum)
        assert stated == accepted(value), (value, stated)

    agree()
