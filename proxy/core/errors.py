"""The proxy's one error family. Each error knows the HTTP status and OpenAI error type it maps to.

Before a response has started, the shell turns a ProxyError into an OpenAI-shaped JSON body
with that status. After it has started, the status can no longer change: the shell fails open
instead (forwards raw bytes, or aborts the connection so the client sees a truncated stream).
"""

from __future__ import annotations

from typing import ClassVar


class ProxyError(Exception):
    status: ClassVar[int] = 500
    type: ClassVar[str] = "proxy_error"
    headers: ClassVar[tuple[tuple[str, str], ...]] = ()  # added to the error response

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigError(ProxyError):
    """Invalid configuration; raised at start only. The CLI prints it and exits with status 2."""


class ClientRequestError(ProxyError):
    status = 400
    type = "invalid_request_error"


class NoRouteError(ClientRequestError):
    status = 404


class UnauthorizedError(ClientRequestError):
    status = 401
    type = "authentication_error"
    headers = (("WWW-Authenticate", "Bearer"),)


class TooManyRequests(ClientRequestError):
    """An upstream's max_concurrent_requests is reached; clients retry after a pause."""

    status = 429
    type = "rate_limit_error"
    headers = (("Retry-After", "1"),)


class UpstreamError(ProxyError):
    status = 502
    type = "upstream_error"


class UpstreamTimeout(UpstreamError):
    status = 504
    type = "upstream_timeout"


class NormalizerError(ProxyError):
    """A bug in the proxy: the normalizer met an input its transition table does not cover."""


class DialectError(ProxyError):
    """A dialect could not make sense of markup; the normalizer catches it and fails open."""
