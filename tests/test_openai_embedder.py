"""Behaviour of the OpenAI-compatible embedder against a faked HTTP edge (respx, loopback URL only)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import numpy as np
import pytest
import respx

from openclaw_lossless.config import Settings
from openclaw_lossless.embed.openai_compat import OpenAIEmbedder
from openclaw_lossless.embed.provider import EmbeddingRateLimited, ProviderIdentity
from openclaw_lossless.embed.service import build_provider
from openclaw_lossless.errors import BadRequest, EmbeddingResponseInvalid, EmbeddingUnavailable

pytestmark = pytest.mark.no_store  # opens no store: the SQLite pass alone runs it

BASE = "http://127.0.0.1:9/v1"
KEY = "sk-test-SECRET-0123456789abcdef"
DIM = 4

Factory = Callable[..., OpenAIEmbedder]


class RecordingSleep:
    """Stands in for ``time.sleep`` so retries are instant and their waits observable."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def api() -> Iterator[Any]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


@pytest.fixture
def sleeps() -> RecordingSleep:
    return RecordingSleep()


@pytest.fixture
def make(sleeps: RecordingSleep) -> Iterator[Factory]:
    created: list[OpenAIEmbedder] = []

    def factory(**overrides: Any) -> OpenAIEmbedder:
        settings: dict[str, Any] = {
            "base_url": BASE,
            "api_key": KEY,
            "model": "test-model",
            "dimensions": DIM,
            "max_retries": 4,
            "sleep": sleeps,
        }
        embedder = OpenAIEmbedder(**(settings | overrides))
        created.append(embedder)
        return embedder

    yield factory
    for embedder in created:
        embedder.close()


def _payload(vectors: list[list[Any]], indices: list[int] | None = None) -> dict[str, Any]:
    order = indices if indices is not None else list(range(len(vectors)))
    items = [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(order, vectors, strict=True)]
    return {"object": "list", "data": items, "model": "test-model"}


def _ok(vectors: list[list[float]]) -> httpx.Response:
    return httpx.Response(200, json=_payload(vectors))


def _vector_for(text: str) -> list[float]:
    """A distinct direction per text ``t<n>``, so row order is checkable after normalisation."""
    return [float(int(text.removeprefix("t")) + 1), 1.0, 0.0, 0.0]


def _unit(vector: list[float]) -> np.ndarray[Any, np.dtype[np.float64]]:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)


def _echo(request: httpx.Request) -> httpx.Response:
    texts = json.loads(request.content)["input"]
    return _ok([_vector_for(text) for text in texts])


def _sent(route: Any, call: int = 0) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(route.calls[call].request.content)
    return body


# --- request shape ---------------------------------------------------------------------------------------


def test_request_carries_model_input_dimensions_and_bearer_key(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(return_value=_ok([[1, 0, 0, 0], [0, 1, 0, 0]]))

    make(model="my-model", dimensions=DIM).embed(["hello", "world"])

    body = _sent(route)
    assert body == {
        "model": "my-model",
        "input": ["hello", "world"],
        "encoding_format": "float",
        "dimensions": 4,
    }
    assert route.calls[0].request.headers["Authorization"] == f"Bearer {KEY}"


def test_known_model_sends_no_dimensions_and_no_key_sends_no_auth(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(return_value=_ok([[1.0] * 1536]))
    embedder = make(model="text-embedding-3-small", dimensions=None, api_key=None)

    vectors = embedder.embed(["x"])

    assert "dimensions" not in _sent(route)
    assert "Authorization" not in route.calls[0].request.headers
    assert vectors.shape == (1, 1536)


def test_identity_reports_provider_model_and_dimension(make: Factory) -> None:
    assert make(model="text-embedding-3-large", dimensions=None).identity == ProviderIdentity(
        "openai-compatible", "text-embedding-3-large", "api", 3072
    )
    assert make(model="text-embedding-3-large", dimensions=256).identity.dimension == 256


def test_unknown_model_without_dimensions_is_rejected_at_construction(make: Factory) -> None:
    with pytest.raises(BadRequest, match="EMBEDDING_DIMENSIONS"):
        make(model="nomic-embed-text", dimensions=None)


def test_empty_input_returns_empty_matrix_without_a_request(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(return_value=_ok([]))

    vectors = make().embed([])

    assert vectors.shape == (0, DIM)
    assert vectors.dtype == np.float32
    assert route.call_count == 0


# --- batching, ordering, normalisation -------------------------------------------------------------------


def test_batches_of_batch_size_preserve_input_order(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(side_effect=_echo)
    texts = [f"t{i}" for i in range(250)]

    vectors = make(batch_size=96).embed(texts)

    assert [len(_sent(route, i)["input"]) for i in range(route.call_count)] == [96, 96, 58]
    assert vectors.shape == (250, DIM)
    expected = np.stack([_unit(_vector_for(text)) for text in texts])
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)


def test_shuffled_response_is_sorted_by_index(api: Any, make: Factory) -> None:
    vectors_in_reply = [[0, 0, 1, 0], [1, 0, 0, 0], [0, 1, 0, 0]]
    reply = _payload(vectors_in_reply, indices=[2, 0, 1])
    api.post("/embeddings").mock(return_value=httpx.Response(200, json=reply))

    vectors = make().embed(["a", "b", "c"])

    np.testing.assert_array_equal(vectors, np.eye(DIM, dtype=np.float32)[:3])


def test_rows_are_l2_normalised_float32_keeping_direction(api: Any, make: Factory) -> None:
    api.post("/embeddings").mock(return_value=_ok([[3, 4, 0, 0], [0, 0, 0, 0.5]]))

    vectors = make().embed(["a", "b"])

    assert vectors.dtype == np.float32
    expected = np.array([[0.6, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)


# --- retries ---------------------------------------------------------------------------------------------


def test_server_error_is_retried_with_backoff_then_succeeds(api: Any, make: Factory, sleeps: RecordingSleep) -> None:
    route = api.post("/embeddings").mock(side_effect=[httpx.Response(500), _ok([[1, 0, 0, 0]])])
    embedder = make(backoff_base_s=0.5)

    vectors = embedder.embed(["a"])

    assert vectors.shape == (1, DIM)
    assert route.call_count == 2
    assert len(sleeps.calls) == 1
    assert 0.25 <= sleeps.calls[0] <= 0.5
    stats = embedder.stats
    assert (stats.requests, stats.retries, stats.failures["http_5xx"]) == (2, 1, 1)


def test_429_waits_for_retry_after_seconds(api: Any, make: Factory, sleeps: RecordingSleep) -> None:
    limited = httpx.Response(429, headers={"Retry-After": "3"}, json={"error": {"message": "slow down"}})
    route = api.post("/embeddings").mock(side_effect=[limited, _ok([[1, 0, 0, 0]])])
    embedder = make(backoff_max_s=8.0)

    embedder.embed(["a"])

    assert route.call_count == 2
    assert sleeps.calls == [3.0]
    assert embedder.stats.failures["http_429"] == 1


class Clock:
    """The embedder's clock, moved by hand: a 30-second wait is tested without waiting 30 seconds."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_long_retry_after_is_waited_out_not_retried_inside_it(
    api: Any, make: Factory, sleeps: RecordingSleep
) -> None:
    """429 with Retry-After: 30: no retry every 8 s inside the wait; no request at all until it has passed."""
    limited = httpx.Response(429, headers={"Retry-After": "30"}, json={"error": {"message": "slow down"}})
    route = api.post("/embeddings").mock(side_effect=[limited, _ok([[1, 0, 0, 0]])])
    clock = Clock()
    embedder = make(backoff_max_s=8.0, clock=clock)

    with pytest.raises(EmbeddingRateLimited) as first:
        embedder.embed(["a"])
    assert first.value.retry_after_s == 30.0
    assert (route.call_count, sleeps.calls) == (1, [])  # not slept inside the call, not retried

    clock.now += 20  # a query, or the worker woken early: refused without a request, told what is left
    with pytest.raises(EmbeddingRateLimited) as again:
        embedder.embed(["a"])
    assert again.value.retry_after_s == pytest.approx(10.0)
    assert route.call_count == 1

    clock.now += 10
    assert embedder.embed(["a"]).shape == (1, DIM)
    assert route.call_count == 2


@pytest.mark.parametrize(
    ("retry_after", "ceiling", "waited"),
    [
        ("600", 60.0, 60.0),  # above the ceiling: the ceiling
        ("Fri, 31 Dec 2100 23:59:59 GMT", 60.0, 60.0),
        ("Fri, 15 Jan 2027 08:00:30 GMT", 60.0, 30.0),  # an HTTP-date 30 s after the clock
        ("45", 120.0, 45.0),
    ],
)
def test_retry_after_is_honoured_up_to_the_ceiling(
    api: Any, make: Factory, retry_after: str, ceiling: float, waited: float
) -> None:
    limited = httpx.Response(429, headers={"Retry-After": retry_after})
    route = api.post("/embeddings").mock(side_effect=[limited, _ok([[1, 0, 0, 0]])])
    clock = Clock(1_800_000_000.0)  # Fri, 15 Jan 2027 08:00:00 GMT
    embedder = make(backoff_max_s=8.0, retry_after_max_s=ceiling, clock=clock)

    with pytest.raises(EmbeddingRateLimited) as limited_for:
        embedder.embed(["a"])
    assert limited_for.value.retry_after_s == pytest.approx(waited)
    clock.now += waited - 1
    with pytest.raises(EmbeddingRateLimited):
        embedder.embed(["a"])
    clock.now += 1
    embedder.embed(["a"])
    assert route.call_count == 2


def test_retry_after_on_the_last_attempt_is_still_respected(api: Any, make: Factory, sleeps: RecordingSleep) -> None:
    """A short wait is slept between retries; the last one's wait still holds back the next call."""
    limited = httpx.Response(503, headers={"Retry-After": "2"})
    route = api.post("/embeddings").mock(side_effect=[limited, limited, _ok([[1, 0, 0, 0]])])
    clock = Clock()
    embedder = make(max_retries=1, backoff_max_s=8.0, clock=clock)

    with pytest.raises(EmbeddingRateLimited):
        embedder.embed(["a"])
    assert (route.call_count, sleeps.calls) == (2, [2.0])
    with pytest.raises(EmbeddingRateLimited):
        embedder.embed(["a"])
    assert route.call_count == 2
    clock.now += 2
    embedder.embed(["a"])
    assert route.call_count == 3


def test_while_a_call_sleeps_out_a_short_retry_after_another_call_sends_nothing(api: Any, make: Factory) -> None:
    """The worker sleeps a 3 s Retry-After before its retry; a query arriving meanwhile falls back at once."""
    limited = httpx.Response(429, headers={"Retry-After": "3"})
    route = api.post("/embeddings").mock(side_effect=[limited, _ok([[1, 0, 0, 0]])])
    clock = Clock()
    refused: list[float] = []

    def sleep(seconds: float) -> None:  # what another thread sees while this call sleeps
        with pytest.raises(EmbeddingRateLimited) as query:
            embedder.embed(["a query"])
        refused.append(query.value.retry_after_s)
        clock.now += seconds

    embedder = make(clock=clock, sleep=sleep)
    assert embedder.embed(["a"]).shape == (1, DIM)
    assert route.call_count == 2  # the first try and its retry; the query sent nothing
    assert refused == [pytest.approx(3.0)]


def test_the_ceiling_comes_from_the_settings(api: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOSSLESS_EMBEDDING_RETRY_AFTER_MAX_S", "20")
    settings = Settings(
        state_dir=tmp_path, embedding_provider="openai-compatible", embedding_base_url=BASE,
        embedding_model="test-model", embedding_dimensions=DIM,
    )  # fmt: skip
    api.post("/embeddings").mock(return_value=httpx.Response(429, headers={"Retry-After": "300"}))
    provider = build_provider(settings)
    try:
        with pytest.raises(EmbeddingRateLimited) as limited:
            provider.embed(["a"])
    finally:
        provider.close()
    assert limited.value.retry_after_s == 20.0


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (httpx.ConnectError("connection refused"), "connect"),
        (httpx.ReadTimeout("read timed out"), "timeout"),
    ],
)
def test_transport_failure_is_retried_then_succeeds(
    api: Any, make: Factory, sleeps: RecordingSleep, error: Exception, kind: str
) -> None:
    route = api.post("/embeddings").mock(side_effect=[error, _ok([[1, 0, 0, 0]])])
    embedder = make()

    vectors = embedder.embed(["a"])

    np.testing.assert_array_equal(vectors, [[1, 0, 0, 0]])
    assert route.call_count == 2
    assert len(sleeps.calls) == 1
    assert embedder.stats.failures[kind] == 1


def test_exhausted_retries_raise_unavailable_after_max_retries_plus_one_attempts(
    api: Any, make: Factory, sleeps: RecordingSleep
) -> None:
    route = api.post("/embeddings").mock(return_value=httpx.Response(503))
    embedder = make(max_retries=3, backoff_base_s=1.0, backoff_max_s=3.0)

    with pytest.raises(EmbeddingUnavailable, match="503"):
        embedder.embed(["a"])

    assert route.call_count == 4
    ceilings = [1.0, 2.0, 3.0]
    assert len(sleeps.calls) == 3
    assert all(c / 2 <= s <= c for s, c in zip(sleeps.calls, ceilings, strict=True))
    assert embedder.stats.retries == 3
    assert embedder.stats.failures["http_5xx"] == 4


def test_401_is_not_retried_and_reports_status_and_api_message(api: Any, make: Factory, sleeps: RecordingSleep) -> None:
    denied = httpx.Response(401, json={"error": {"message": "Incorrect API key provided", "type": "auth"}})
    route = api.post("/embeddings").mock(return_value=denied)
    embedder = make()

    with pytest.raises(EmbeddingUnavailable) as caught:
        embedder.embed(["a"])

    assert type(caught.value) is EmbeddingUnavailable
    assert "401" in caught.value.message
    assert "Incorrect API key provided" in caught.value.message
    assert route.call_count == 1
    assert sleeps.calls == []
    assert embedder.stats.failures["http_4xx"] == 1


def test_400_is_not_retried(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(return_value=httpx.Response(400, json={"error": "input too long"}))

    with pytest.raises(EmbeddingUnavailable, match="input too long"):
        make().embed(["a"])

    assert route.call_count == 1


# --- secrets ---------------------------------------------------------------------------------------------


def test_api_key_echoed_by_server_is_redacted_from_errors_and_stats(api: Any, make: Factory) -> None:
    echo = httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
    api.post("/embeddings").mock(return_value=echo)
    embedder = make()

    with pytest.raises(EmbeddingUnavailable) as caught:
        embedder.embed(["a"])

    assert KEY not in str(caught.value)
    assert KEY not in repr(embedder.stats)
    assert KEY not in json.dumps(embedder.stats.as_dict())
    assert embedder.stats.last_error is not None
    assert "401" in embedder.stats.last_error


def test_api_key_absent_from_exhaustion_error_and_its_chain(api: Any, make: Factory) -> None:
    api.post("/embeddings").mock(side_effect=httpx.ConnectError("connection refused"))
    embedder = make(max_retries=1)

    with pytest.raises(EmbeddingUnavailable) as caught:
        embedder.embed(["a"])

    assert KEY not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert KEY not in repr(embedder.stats)


# --- response validation ---------------------------------------------------------------------------------


def test_body_that_is_not_json_is_invalid_and_not_retried(api: Any, make: Factory) -> None:
    route = api.post("/embeddings").mock(return_value=httpx.Response(200, text="<html>oops</html>"))
    embedder = make()

    with pytest.raises(EmbeddingResponseInvalid, match="not JSON"):
        embedder.embed(["a"])

    assert route.call_count == 1
    assert embedder.stats.failures["invalid_json"] == 1


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ({"object": "list"}, "no 'data'"),
        (_payload([[1, 0, 0, 0]]), "1 vectors for 2 texts"),
        (_payload([[1, 0, 0], [0, 1, 0]]), "dimension 3, expected 4"),
        ({"data": [{"embedding": [1, 0, 0, 0]}, {"index": 1, "embedding": [0, 1, 0, 0]}]}, "'index'"),
        (_payload([[1, 0, 0, 0], [0, 1, 0, 0]], indices=[0, 0]), "duplicate"),
        (_payload([[1, 0, 0, 0], [0, 1, 0, 0]], indices=[0, 2]), "out-of-range"),
        (_payload([[1, 0, 0, 0], ["1", 0, 0, 0]]), "not a list of numbers"),
        (_payload([[1, 0, 0, 0], [0, 0, 0, 0]]), "zero"),
    ],
)
def test_malformed_response_is_rejected(api: Any, make: Factory, reply: dict[str, Any], reason: str) -> None:
    api.post("/embeddings").mock(return_value=httpx.Response(200, json=reply))

    with pytest.raises(EmbeddingResponseInvalid, match=reason):
        make().embed(["a", "b"])
