"""Support for the hostile-input tests: schemathesis cases against a live sidecar, and the figures they record.

The schema is the app's own ``app.openapi()``, so an endpoint added tomorrow is fuzzed without touching the
tests. Each response is held to what a caller relies on: never a 5xx, always JSON, an error always in the one
shape with a known code, and every body as the schema documents it (schemathesis' own conformance checks).

Figures (cases per endpoint, statuses, 5xx) are recorded by the tests with ``tests.reliability.record``
beside the other reliability figures (an ignored file on an ordinary run; the committed
``benchmarks/results/reliability.json`` with ``make reliability``), so the README's table comes from runs
of the same tests that assert the properties.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from openclaw_lossless import errors
from openclaw_lossless.app import create_app
from openclaw_lossless.config import Settings

# Codes the app answers with: the error tree's, plus those the one handler gives routing errors.
KNOWN_CODES = frozenset(
    {cls.code for cls in vars(errors).values() if isinstance(cls, type) and issubclass(cls, errors.LosslessError)}
    | {"not_found", "method_not_allowed", "payload_too_large"}
)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


def app_schema(state_dir: Path) -> dict[str, Any]:
    """The OpenAPI schema exactly as the app serves it (an explicit token, so nothing is written)."""
    app = create_app(Settings(state_dir=state_dir, token=SecretStr("schema-only-never-served")))
    schema: dict[str, Any] = app.openapi()
    return schema


def operations(schema: dict[str, Any]) -> list[Any]:
    loaded = schemathesis.openapi.from_dict(schema)
    found = []
    for result in loaded.get_all_operations():
        assert isinstance(result, Ok), f"the app's OpenAPI schema is invalid: {result}"
        found.append(result.ok())
    return found


def has_inputs(operation: Any) -> bool:
    """Whether anything can be wrong in a request (a body or a parameter); if not, negative cases cannot exist."""
    definition = operation.definition.raw
    return bool(definition.get("parameters") or definition.get("requestBody"))


@dataclass
class Tally:
    """What one endpoint answered to the generated cases."""

    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    refusals: list[str] = field(default_factory=list)  # the first 4xx answers' messages, to say which rule

    def view(self) -> dict[str, Any]:
        server_errors = sum(n for status, n in self.statuses.items() if status >= 500)
        return {
            "cases": self.cases,
            "5xx": server_errors,
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
        }


def check_error_shape(status: int, body: Any) -> None:
    """Every 4xx/5xx: ``{"error": {"code": <known>, "message": <non-empty>}}`` and nothing else."""
    assert isinstance(body, dict) and set(body) == {"error"}, (status, body)
    assert set(body["error"]) == {"code", "message"}, (status, body)
    assert body["error"]["code"] in KNOWN_CODES, (status, body)
    assert isinstance(body["error"]["message"], str) and body["error"]["message"].strip(), (status, body)


def fuzz(
    operation: Any,
    mode: GenerationMode,
    base_url: str,
    token: str,
    examples: int,
    tally: Tally,
    snapshot: Callable[[], Any] | None = None,
) -> None:
    """Run up to ``examples`` generated cases of ``operation``; fails (shrunk by Hypothesis) on the first bad answer.

    With ``snapshot`` (the database's fingerprint), a request answered 4xx must leave it unchanged.
    """
    auth = {"Authorization": f"Bearer {token}"}
    known: list[Any] = []  # the fingerprint as of the last answer; a rejection leaves it valid for the next case

    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(mode))
    def run(case: Any) -> None:
        if snapshot is not None and not known:
            known.append(snapshot())
        response = case.call(base_url=base_url, headers=auth, timeout=60)
        tally.cases += 1
        tally.statuses[response.status_code] += 1
        content_type = response.headers.get("content-type", [""])[0]
        assert content_type.startswith("application/json"), (response.status_code, content_type, response.text[:200])
        if response.status_code >= 400:
            check_error_shape(response.status_code, response.json())
            if response.status_code < 500 and len(tally.refusals) < 5:
                tally.refusals.append(f"{response.status_code} {response.json()['error']['message'][:200]}")
            if snapshot is not None and response.status_code < 500:
                assert snapshot() == known[0], f"rejected with {response.status_code} but the database changed"
        else:
            known.clear()
        case.validate_response(response, checks=CHECKS, headers=auth)

    run()
