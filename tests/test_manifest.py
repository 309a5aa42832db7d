"""plugin-manifest.json is the one description of the contract: it must match the app's routes and settings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from openclaw_lossless.api import schemas
from openclaw_lossless.app import create_app
from openclaw_lossless.config import RecallOverrides, Settings

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

MANIFEST: dict[str, Any] = json.loads((Path(__file__).parents[1] / "plugin-manifest.json").read_text())
SEED_SETTINGS = ["retrievalCount", "windowShare", "recencyDecayHours", "skipHeartbeats", "maxDbSizeMb", "minSimilarity"]


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    document: dict[str, Any] = create_app(Settings(state_dir=tmp_path_factory.mktemp("manifest"))).openapi()
    return document


@pytest.fixture(scope="module")
def routes(openapi: dict[str, Any]) -> dict[str, set[str]]:
    paths: dict[str, dict[str, Any]] = openapi["paths"]
    return {path: {method.upper() for method in operations} for path, operations in paths.items()}


def test_each_hook_route_takes_and_returns_the_schemas_the_manifest_names(openapi: dict[str, Any]) -> None:
    for name, hook in MANIFEST["hooks"].items():
        operation = openapi["paths"][hook["path"]][hook["method"].lower()]
        request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
        response = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        assert (request.rsplit("/", 1)[-1], response.rsplit("/", 1)[-1]) == (hook["request"], hook["response"]), name


def test_every_per_request_setting_has_the_sidecars_default() -> None:
    properties, settings = MANIFEST["config"]["properties"], Settings()
    for name in MANIFEST["requestOverrides"]:
        assert properties[name]["default"] == getattr(settings, snake(name)), name


def test_every_hook_in_the_manifest_is_a_route_with_its_schemas(routes: dict[str, set[str]]) -> None:
    for name, hook in MANIFEST["hooks"].items():
        assert hook["method"] in routes.get(hook["path"], set()), name
        assert hasattr(schemas, hook["request"]) and hasattr(schemas, hook["response"]), name
        assert hook["timeout"] in MANIFEST["config"]["properties"]["timeouts"]["properties"], name


def test_every_hook_route_is_in_the_manifest(routes: dict[str, set[str]]) -> None:
    documented = {hook["path"] for hook in MANIFEST["hooks"].values()}
    assert {path for path in routes if path.startswith("/v1/hooks/")} == documented


def test_operator_endpoints_exist(routes: dict[str, set[str]]) -> None:
    for endpoint in MANIFEST["operator"].values():
        assert endpoint["method"] in routes[endpoint["path"]]


def test_seed_settings_keep_their_names_and_defaults() -> None:
    properties = MANIFEST["config"]["properties"]
    settings = Settings()
    for name in [*SEED_SETTINGS, "recallScope"]:
        assert properties[name]["default"] == getattr(settings, snake(name)), name
    assert (settings.retrieval_count, settings.window_share, settings.recency_decay_hours) == (20, 0.6, 168)
    assert (settings.skip_heartbeats, settings.max_db_size_mb, settings.min_similarity) == (True, 500, 0.3)


def test_request_overrides_match_what_the_sidecar_accepts() -> None:
    accepted = {field.alias for field in RecallOverrides.model_fields.values()}
    assert set(MANIFEST["requestOverrides"]) == accepted
    assert set(MANIFEST["requestOverrides"]) <= set(MANIFEST["config"]["properties"])


def test_the_config_schema_rejects_unknown_keys() -> None:
    assert MANIFEST["config"]["additionalProperties"] is False
