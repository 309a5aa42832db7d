"""The exception tree: every error the sidecar reports carries its HTTP status and a stable code.

One handler in ``app.py`` turns any ``LosslessError`` into ``{"error": {"code", "message"}}`` with its
status, so callers (the plugin, the CLI, scripts) can rely on the code, not on the wording.

    LosslessError (500 internal)
    ├── BadRequest (422 invalid_request)
    │   ├── InvalidSessionKey (422 invalid_session_key)
    │   └── InvalidName (422 invalid_name)
    ├── Unauthorized (401 unauthorized)
    ├── NotFound (404 not_found)
    ├── PayloadTooLarge (413 payload_too_large)
    ├── StorageFull (507 storage_full)            retryable: the turn is not stored, nothing changed
    ├── StoreUnavailable (503 store_unavailable)  retryable
    │   └── StoreReadOnly (503 store_read_only)
    ├── StoreCorrupt (500 store_corrupt)
    ├── SchemaTooNew (500 schema_too_new)
    └── EmbeddingUnavailable (503 embedding_unavailable)
        └── EmbeddingResponseInvalid (502 embedding_response_invalid)
"""

from __future__ import annotations


class LosslessError(Exception):
    """Base of every error this project raises on purpose."""

    status = 500
    code = "internal"
    retryable = False

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(LosslessError):
    status = 422
    code = "invalid_request"


class InvalidSessionKey(BadRequest):
    code = "invalid_session_key"


class InvalidName(BadRequest):
    code = "invalid_name"


class Unauthorized(LosslessError):
    status = 401
    code = "unauthorized"


class NotFound(LosslessError):
    status = 404
    code = "not_found"


class PayloadTooLarge(LosslessError):
    status = 413
    code = "payload_too_large"


class StorageFull(LosslessError):
    status = 507
    code = "storage_full"
    retryable = True


class StoreUnavailable(LosslessError):
    status = 503
    code = "store_unavailable"
    retryable = True


class StoreReadOnly(StoreUnavailable):
    code = "store_read_only"


class StoreCorrupt(LosslessError):
    code = "store_corrupt"


class SchemaTooNew(LosslessError):
    code = "schema_too_new"


class EmbeddingUnavailable(LosslessError):
    status = 503
    code = "embedding_unavailable"
    retryable = True


class EmbeddingResponseInvalid(EmbeddingUnavailable):
    status = 502
    code = "embedding_response_invalid"
