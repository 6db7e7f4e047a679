"""The proxy's one middleware: a request id on every request, the request tracked for the
shutdown's grace (proxy.shell.drain), the Exchange recorded and logged (proxy.shell.accesslog),
HTTP/1.x only, the client's key when keys are set (proxy.shell.auth), errors as JSON in the
client's protocol's shape. One middleware rather than six: aiohttp wraps each in a partial
and a coroutine on every request, and each of these is a few lines.

Whatever a handler raises reaches the client in its protocol's shape: a ProxyError with its
status, any other exception (a bug in the proxy) as a 500, logged once with its traceback and
the request id. After the response has started, a status can no longer be sent: the
connection is closed without ending the response, so the client sees the cut.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Callable, Collection
from typing import Final

import orjson
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware

from proxy.core.errors import MethodNotAllowed, NotHTTP1, ProxyError
from proxy.core.policy import client_protocol
from proxy.shell.accesslog import recorded
from proxy.shell.app_state import REQUEST_ID, RESPONSE_STARTED
from proxy.shell.auth import ClientKeys, check_key
from proxy.shell.drain import Drain
from proxy.shell.exchange import EXCHANGE

log = logging.getLogger("toolcall_proxy")

# A client's id is echoed and forwarded, so it must be a short, header-safe token.
_CLIENT_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")
MAX_LOGGED_PATH: Final = 256
#: how the access line's ``end`` names a request the proxy failed on (a bug: logged)
PROXY_ERROR: Final = "proxy_error"


def loggable(text: str, limit: int = MAX_LOGGED_PATH) -> str:
    """``text`` as one safe log line: control characters escaped (a decoded path may hold a
    CR or LF, which would start a forged line), cut to ``limit`` characters."""
    shown = text if text.isprintable() else text.encode("unicode_escape").decode("ascii")
    return shown if len(shown) <= limit else shown[: limit - 3] + "..."


def error_body(message: str, type_: str, status: int) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "code": status}})


def error_response(
    status: int, message: str, type_: str, request: web.Request | None = None
) -> web.Response:
    """An error in the shape of the client's protocol: OpenAI's, or that of the Responses or
    Messages protocol the request speaks."""
    protocol = None if request is None else client_protocol(request.method, request.path)
    own = None if protocol is None else protocol.error_body
    body = error_body(message, type_, status) if own is None else own(status, message)
    return web.Response(status=status, body=body, content_type="application/json")


def proxy_middleware(
    *,
    own_prefix: str,
    drain: Drain,
    keys_of: Callable[[web.Request], ClientKeys | None],
    public: Collection[Handler],
) -> Middleware:
    """Every request, in this order: its id (the client's, when it is a short safe token),
    tracked for the shutdown's grace, recorded (but the proxy's own endpoints under
    ``own_prefix``), then answered with errors shaped (:func:`answer`). ``keys_of``: the
    running configuration's inbound keys (None: no authentication; a reload may turn it on);
    ``public``: the handlers that need none."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        given = request.headers.get("X-Request-Id", "")
        request[REQUEST_ID] = given if _CLIENT_ID.fullmatch(given) else uuid.uuid4().hex
        task = asyncio.current_task()
        assert task is not None
        drain.track(task, request)

        async def answered(request: web.Request) -> web.StreamResponse:
            return await answer(request, handler, keys_of(request), public)

        try:
            if request.path.startswith(own_prefix):
                return await answered(request)
            return await recorded(request, answered)
        finally:
            drain.done(task)

    return middleware


async def answer(
    request: web.Request,
    handler: Handler,
    keys: ClientKeys | None,
    public: Collection[Handler],
) -> web.StreamResponse:
    """The handler's answer; errors raised before the response started as JSON with the right
    status. Refused first: what aiohttp's parser accepts but this proxy must not serve, and
    a request without an accepted key."""
    try:
        if request.version.major != 1:  # "GET /" without a version is parsed as HTTP/0.9
            raise NotHTTP1(
                f"HTTP/{request.version.major}.{request.version.minor} is not served here;"
                " send HTTP/1.1 or HTTP/1.0"
            )
        if request.method == hdrs.METH_CONNECT:
            raise MethodNotAllowed("CONNECT is not allowed: this is not a forward proxy")
        if keys is not None:
            check_key(request, keys, public)
        return await handler(request)  # response_prepared puts the request id on it
    except ProxyError as exc:
        if exc.status >= 500:
            log.warning("%s %s: %s", request.method, loggable(request.path), exc.message)
        response = error_response(exc.status, exc.message, exc.type, request)
        response.headers.extend(exc.headers)
        if exc.closes_connection:
            return await _answer_and_close(request, response)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason, "invalid_request_error", request)
    except Exception as exc:
        return _internal_error(request, exc)


def _internal_error(request: web.Request, exc: Exception) -> web.Response:
    """A bug in the proxy: logged once, with its traceback, and answered as a 500 in the
    client's protocol's shape, or, once the response has started, by closing the connection
    without ending it."""
    log.error(
        "request %s: %s %s failed inside the proxy",
        request[REQUEST_ID],
        request.method,
        loggable(request.path),
        exc_info=exc,
    )
    exchange = request.get(EXCHANGE)
    if exchange is not None:
        exchange.end = exchange.end or PROXY_ERROR
    if request.get(RESPONSE_STARTED):
        if request.transport is not None:
            request.transport.close()
        # What aiohttp finishes of this goes nowhere: the transport is closing. The access
        # line keeps the status that was sent.
        return web.Response(status=500)
    message = f"the proxy failed on this request (request id {request[REQUEST_ID]}); see its log"
    return error_response(500, message, "proxy_error", request)


async def response_prepared(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``, for every response the proxy sends (its own, an upstream's,
    an error): the one place ``X-Request-Id`` is set, and from here on the status is sent and
    cannot change."""
    request_id = request.get(REQUEST_ID)
    if request_id is not None:
        response.headers["X-Request-Id"] = request_id
    request[RESPONSE_STARTED] = True


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send the answer now, then close the connection.

    Left to aiohttp, a response to a request whose body was not read whole is followed by up to
    10 s of "lingering" reads of that body, which is right for a body that is still coming (a
    413: the client reads the answer instead of a reset) and a waste for one that is not.
    """
    response.force_close()
    exchange = request.get(EXCHANGE)
    if exchange is not None and isinstance(response.body, bytes):
        exchange.meter.sending(response.body)
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the answer is flushed before the socket closes
    return response
