"""The Anthropic error shape: ``{"type": "error", "error": {"type": ..., "message": ...}}``.

The proxy's own errors on ``/v1/messages`` and an upstream's 4xx/5xx before the stream use it,
so an Anthropic SDK raises its own typed exception (``RateLimitError``, ...) rather than
failing on a body it cannot read. ``error.type`` comes from the status, as the Anthropic API
documents its errors.
"""

from __future__ import annotations

from typing import Final

import orjson

from proxy.core.jsonvalues import JSONObject

_BY_STATUS: Final = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_type(status: int) -> str:
    """The Anthropic ``error.type`` for an HTTP status (other 4xx: invalid_request_error)."""
    known = _BY_STATUS.get(status)
    if known is not None:
        return known
    return "api_error" if status >= 500 else "invalid_request_error"


KNOWN_TYPES: Final = frozenset({*_BY_STATUS.values(), "api_error"})


def stream_error_type(kind: str | None) -> str:
    """An error type from inside a stream (often an OpenAI one) as an Anthropic type."""
    return kind if kind in KNOWN_TYPES else "api_error"


def error_object(message: str, kind: str) -> JSONObject:
    return {"type": "error", "error": {"type": kind, "message": message}}


def error_body(status: int, message: str) -> bytes:
    """The JSON body of an error response with ``status``."""
    return orjson.dumps(error_object(message, error_type(status)))
