"""The client for any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

It owns everything between "embed these texts" and a trustworthy matrix: batching, bounded retries with
backoff (transport failures, 429 and 5xx only), strict validation of what the server sent back, and
L2-normalisation. A server's ``Retry-After`` is honoured up to ``retry_after_max_s``: a short wait (up to
``backoff_max_s``) is slept before the retry; a longer one is not retried inside it: the call fails with
``EmbeddingRateLimited`` saying how long to wait, and every call until then fails the same way without a
request, so the backlog worker waits it out (interruptibly) and a query falls back to keywords at once.

The backlog worker calls it from a background thread, so it is synchronous and keeps operator-facing
counters (``stats``) that the ``/stats`` endpoint can read from another thread.

Settings arrive as constructor arguments; this module reads no environment. The API key and the input
texts are never logged and never put in an exception message or in ``stats``.
"""

from __future__ import annotations

import email.utils
import logging
import math
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import httpx
import numpy as np

from openclaw_lossless.embed.provider import EmbeddingRateLimited, ProviderIdentity, Vectors
from openclaw_lossless.errors import BadRequest, EmbeddingResponseInvalid, EmbeddingUnavailable

log = logging.getLogger(__name__)

KNOWN_DIMENSIONS: Mapping[str, int] = {
    "text-embedding-3-small": 1536,
    "text-embedding-3-large": 3072,
    "text-embedding-ada-002": 1536,
}

FAILURE_KINDS = (
    "timeout",
    "connect",
    "transport",
    "http_429",
    "http_5xx",
    "http_4xx",
    "http_other",
    "invalid_json",
    "wrong_count",
    "wrong_dimension",
    "invalid_response",
)

_MAX_ERROR_CHARS = 300
# A call this close to the end of the server's wait goes ahead: the worker's own wait may end a hair early.
_WAIT_SLACK_S = 0.25


@dataclass(frozen=True)
class EmbedderStats:
    """A consistent copy of the counters, safe to hand to another thread or serialise."""

    requests: int
    retries: int
    failures: Mapping[str, int]
    last_error: str | None

    def as_dict(self) -> dict[str, object]:
        return {
            "requests": self.requests,
            "retries": self.retries,
            "failures": dict(self.failures),
            "last_error": self.last_error,
        }


class _Counters:
    """Mutable counters behind a lock: the worker writes while ``/stats`` reads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests = 0
        self._retries = 0
        self._failures = dict.fromkeys(FAILURE_KINDS, 0)
        self._last_error: str | None = None

    def request(self) -> None:
        with self._lock:
            self._requests += 1

    def retry(self) -> None:
        with self._lock:
            self._retries += 1

    def failure(self, kind: str, message: str) -> None:
        with self._lock:
            self._failures[kind] = self._failures.get(kind, 0) + 1
            self._last_error = message

    def snapshot(self) -> EmbedderStats:
        with self._lock:
            return EmbedderStats(self._requests, self._retries, dict(self._failures), self._last_error)


class _InvalidResponse(EmbeddingResponseInvalid):
    """A response that fails validation, with the kind it is counted under in ``stats``."""

    def __init__(self, message: str, kind: str = "invalid_response") -> None:
        super().__init__(message)
        self.kind = kind


class _TransientError(Exception):
    """One attempt failed in a way worth retrying; carries the server's requested wait, if any."""

    def __init__(self, message: str, retry_after_s: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retry_after_s = retry_after_s


class OpenAIEmbedder:
    """``EmbeddingProvider`` backed by an OpenAI-compatible HTTP API."""

    def __init__(
        self,
        *,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        model: str = "text-embedding-3-small",
        dimensions: int | None = None,
        batch_size: int = 96,
        timeout_s: float = 10.0,
        max_retries: int = 4,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 8.0,
        retry_after_max_s: float = 60.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        _check_settings(dimensions, batch_size, timeout_s, max_retries, backoff_base_s, backoff_max_s)
        if not retry_after_max_s >= 0:
            raise BadRequest(f"embedding Retry-After ceiling must not be negative, got {retry_after_max_s}")
        self._identity = ProviderIdentity("openai-compatible", model, "api", _resolve_dimension(model, dimensions))
        self._url = base_url.rstrip("/") + "/embeddings"
        self._api_key = api_key or None
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._max_retries = max_retries
        self._backoff_base_s = backoff_base_s
        self._backoff_max_s = backoff_max_s
        self._retry_after_max_s = retry_after_max_s
        self._sleep = sleep
        self._clock = clock
        self._not_before = 0.0  # the clock's time before which the server asked not to be called
        self._rng = random.Random()
        self._counters = _Counters()
        self._client = httpx.Client(timeout=httpx.Timeout(timeout_s), transport=transport, headers=self._headers())

    @property
    def identity(self) -> ProviderIdentity:
        return self._identity

    @property
    def stats(self) -> EmbedderStats:
        return self._counters.snapshot()

    def embed(self, texts: list[str]) -> Vectors:
        """Embed in batches; one failed batch fails the call so the caller re-queues the whole lot."""
        dimension = self._identity.dimension
        if not texts:
            return np.zeros((0, dimension), dtype=np.float32)
        size = self._batch_size
        parts = [self._embed_batch(texts[i : i + size]) for i in range(0, len(texts), size)]
        return np.concatenate(parts, axis=0)

    def close(self) -> None:
        self._client.close()

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def _body(self, batch: list[str]) -> dict[str, Any]:
        body: dict[str, Any] = {"model": self._model, "input": batch, "encoding_format": "float"}
        if self._dimensions is not None:
            body["dimensions"] = self._dimensions
        return body

    def _embed_batch(self, batch: list[str]) -> Vectors:
        """Retry only what can heal by waiting; give up after ``max_retries`` so the worker moves on."""
        body = self._body(batch)
        self._check_not_waiting()
        for attempt in range(self._max_retries + 1):
            try:
                return self._attempt(body, len(batch))
            except _TransientError as exc:
                wait = None if exc.retry_after_s is None else min(exc.retry_after_s, self._retry_after_max_s)
                if wait is not None and (wait > self._backoff_max_s or attempt == self._max_retries):
                    raise self._rate_limited(wait, exc.message) from None
                if attempt == self._max_retries:
                    raise EmbeddingUnavailable(
                        f"embedding API failed after {attempt + 1} attempts: {exc.message}"
                    ) from None
                if wait is not None:  # slept here before the retry; other callers meanwhile send nothing
                    self._hold_off(wait)
                delay = wait if wait is not None else self._backoff(attempt)
                log.debug("embedding attempt %d failed, retrying in %.2fs", attempt + 1, delay)
                self._counters.retry()
                self._sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    def _backoff(self, attempt: int) -> float:
        """Exponential backoff with equal jitter, for failures that name no wait."""
        ceiling = min(self._backoff_max_s, self._backoff_base_s * 2.0**attempt)
        return ceiling / 2 + self._rng.uniform(0, ceiling / 2)

    def _hold_off(self, wait: float) -> None:
        """Remember the server's wait: every call that starts before it ends fails without a request."""
        self._not_before = max(self._not_before, self._clock() + wait)

    def _rate_limited(self, wait: float, message: str) -> EmbeddingRateLimited:
        """Give up on this call until the server's wait is over, and say how long that is."""
        self._hold_off(wait)
        return EmbeddingRateLimited(f"embedding API asked to wait {wait:.0f}s before the next request: {message}", wait)

    def _check_not_waiting(self) -> None:
        """Within the server's requested wait no request is sent: it would only be refused again."""
        left = self._not_before - self._clock()
        if left > _WAIT_SLACK_S:
            raise EmbeddingRateLimited(f"embedding API asked to wait; {left:.0f}s left before the next request", left)

    def _attempt(self, body: dict[str, Any], expected: int) -> Vectors:
        self._counters.request()
        response = self._send(body)
        log.debug("embedding request for %d texts: HTTP %d", expected, response.status_code)
        self._check_status(response)
        try:
            return _parse_vectors(response, expected, self._identity.dimension)
        except EmbeddingResponseInvalid as exc:
            self._counters.failure(getattr(exc, "kind", "invalid_response"), exc.message)
            raise

    def _send(self, body: dict[str, Any]) -> httpx.Response:
        """Classify transport failures; ``from None`` keeps the request (and its headers) off the chain."""
        try:
            return self._client.post(self._url, json=body)
        except httpx.TimeoutException as exc:
            raise self._transient("timeout", f"timed out ({type(exc).__name__})") from None
        except httpx.ConnectError as exc:
            raise self._transient("connect", f"cannot connect: {self._redact(str(exc))}") from None
        except httpx.TransportError as exc:
            raise self._transient("transport", f"transport error ({type(exc).__name__})") from None

    def _check_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if 200 <= status < 300:
            return
        detail = f"HTTP {status}: {self._redact(_api_error_message(response))}"
        if status == 429 or status >= 500:
            kind = "http_429" if status == 429 else "http_5xx"
            retry_after = _retry_after_s(response.headers.get("Retry-After"), self._clock())
            raise self._transient(kind, detail, retry_after)
        self._counters.failure("http_4xx" if 400 <= status < 500 else "http_other", detail)
        raise EmbeddingUnavailable(f"embedding API rejected the request: {detail}")

    def _transient(self, kind: str, message: str, retry_after_s: float | None = None) -> _TransientError:
        self._counters.failure(kind, message)
        return _TransientError(message, retry_after_s)

    def _redact(self, text: str) -> str:
        """Some servers echo the key back in auth errors; never let it through, and keep messages short."""
        if self._api_key:
            text = text.replace(self._api_key, "[redacted]")
        return text[:_MAX_ERROR_CHARS]


def _check_settings(
    dimensions: int | None,
    batch_size: int,
    timeout_s: float,
    max_retries: int,
    backoff_base_s: float,
    backoff_max_s: float,
) -> None:
    """Fail at start-up on nonsense settings instead of on the first embedding."""
    if dimensions is not None and dimensions < 1:
        raise BadRequest(f"EMBEDDING_DIMENSIONS must be positive, got {dimensions}")
    if batch_size < 1:
        raise BadRequest(f"embedding batch size must be at least 1, got {batch_size}")
    if max_retries < 0:
        raise BadRequest(f"embedding max retries must not be negative, got {max_retries}")
    if timeout_s <= 0 or backoff_base_s < 0 or backoff_max_s < 0:
        raise BadRequest("embedding timeout must be positive and backoff times not negative")


def _resolve_dimension(model: str, dimensions: int | None) -> int:
    """The index needs the dimension before any request, so unknown models must state it."""
    if dimensions is not None:
        return dimensions
    known = KNOWN_DIMENSIONS.get(model)
    if known is None:
        raise BadRequest(
            f"unknown dimension for embedding model {model!r}; set EMBEDDING_DIMENSIONS to its vector size"
        )
    return known


def _api_error_message(response: httpx.Response) -> str:
    """OpenAI nests the message under ``error.message``; compatible servers vary, so fall back to text."""
    try:
        payload = response.json()
    except ValueError:
        return response.text.strip() or response.reason_phrase
    if isinstance(payload, dict):
        error = payload.get("error", payload.get("detail", payload.get("message")))
        if isinstance(error, dict) and "message" in error:
            return str(error["message"])
        if error is not None:
            return str(error)
    return str(payload)


def _retry_after_s(value: str | None, now: float) -> float | None:
    """Retry-After is either delta-seconds or an HTTP-date; anything unparseable means "use backoff"."""
    if not value:
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - now
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _parse_vectors(response: httpx.Response, expected: int, dimension: int) -> Vectors:
    """Trust nothing: a bad vector stored in the index would silently poison recall forever."""
    try:
        payload = response.json()
    except ValueError:
        raise _InvalidResponse("embedding API returned a body that is not JSON", "invalid_json") from None
    data = payload.get("data") if isinstance(payload, dict) else None
    if not isinstance(data, list):
        raise EmbeddingResponseInvalid("embedding API response has no 'data' list")
    if len(data) != expected:
        raise _InvalidResponse(f"embedding API returned {len(data)} vectors for {expected} texts", "wrong_count")
    rows = _rows_by_index(data, dimension)
    return _normalise(np.asarray(rows, dtype=np.float64))


def _rows_by_index(data: list[Any], dimension: int) -> list[list[float]]:
    """Servers may answer out of order; ``index`` is the only link back to the input text."""
    rows: list[list[float] | None] = [None] * len(data)
    for item in data:
        index, embedding = _item_fields(item, dimension)
        if not 0 <= index < len(rows) or rows[index] is not None:
            raise EmbeddingResponseInvalid(f"embedding API returned a duplicate or out-of-range index {index}")
        rows[index] = embedding
    return [row for row in rows if row is not None]


def _item_fields(item: Any, dimension: int) -> tuple[int, list[float]]:
    if not isinstance(item, dict):
        raise EmbeddingResponseInvalid("embedding API 'data' holds a non-object item")
    index, embedding = item.get("index"), item.get("embedding")
    if type(index) is not int:
        raise EmbeddingResponseInvalid("embedding API item has a missing or non-integer 'index'")
    if not isinstance(embedding, list) or not all(type(x) in (int, float) for x in embedding):
        raise EmbeddingResponseInvalid(f"embedding API item {index} is not a list of numbers")
    if len(embedding) != dimension:
        raise _InvalidResponse(
            f"embedding API item {index} has dimension {len(embedding)}, expected {dimension}", "wrong_dimension"
        )
    return index, embedding


def _normalise(matrix: np.ndarray[Any, np.dtype[np.float64]]) -> Vectors:
    """Cosine search assumes unit rows; a zero or non-finite vector cannot be made one."""
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if not np.all(np.isfinite(norms)) or np.any(norms == 0):
        raise EmbeddingResponseInvalid("embedding API returned a zero or non-finite vector")
    unit: Vectors = (matrix / norms).astype(np.float32)
    return unit
