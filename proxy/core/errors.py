"""The proxy's one error family. Each error knows the HTTP status and OpenAI error type it maps to.

Before a response has started, the shell turns a ProxyError into an OpenAI-shaped JSON body
with that status. After it has started, the status can no longer change: the shell fails open
instead (forwards raw bytes, or aborts the connection so the client sees a truncated stream).
"""

from __future__ import annotations

from typing import ClassVar, Final

#: how much of a client's value an error message quotes
MAX_SHOWN: Final = 80


class ProxyError(Exception):
    status: ClassVar[int] = 500
    type: ClassVar[str] = "proxy_error"
    headers: ClassVar[tuple[tuple[str, str], ...]] = ()  # added to the error response
    closes_connection: ClassVar[bool] = False  # the connection is closed after the answer

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def shown(value: object) -> str:
    """A client's value as an error message quotes it: its repr, cut to about MAX_SHOWN
    characters (a 1 MB value is not sent back whole)."""
    if isinstance(value, str | bytes) and len(value) > MAX_SHOWN:
        return repr(value[:MAX_SHOWN]) + f"... ({len(value)} characters)"
    text = repr(value)
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN] + "..."


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


class PayloadTooLarge(ClientRequestError):
    """A body the proxy reads is over limits.max_request_body_bytes."""

    status = 413


class RequestTimeout(ClientRequestError):
    """A body the proxy reads did not arrive within timeouts.request_body."""

    status = 408
    closes_connection = True  # what is left of the body will not come, or too late


class NotHTTP1(ClientRequestError):
    """A request line without a version (HTTP/0.9) or with one other than HTTP/1.x."""

    closes_connection = True  # its framing is not one this proxy can trust


class MethodNotAllowed(ClientRequestError):
    """CONNECT: this is a reverse proxy, it opens no tunnels."""

    status = 405
    headers = (("Allow", "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"),)
    closes_connection = True  # what a client sends after CONNECT is meant for a tunnel


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
