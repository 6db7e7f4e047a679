"""Middlewares: a request id on every request, HTTP/1.x only, errors as OpenAI-shaped JSON."""

from __future__ import annotations

import logging
import re
import uuid
from typing import Final

import orjson
from aiohttp import hdrs, web
from aiohttp.typedefs import Handler

from proxy.core.errors import MethodNotAllowed, NotHTTP1, ProxyError
from proxy.core.policy import client_protocol
from proxy.shell.app_state import REQUEST_ID

log = logging.getLogger("toolcall_proxy")

# A client's id is echoed and forwarded, so it must be a short, header-safe token.
_CLIENT_ID: Final = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def error_body(message: str, type_: str, status: int) -> bytes:
    return orjson.dumps({"error": {"message": message, "type": type_, "code": status}})


def error_response(
    status: int, message: str, type_: str, request: web.Request | None = None
) -> web.Response:
    """An error in the shape of the client's protocol: OpenAI's, or that of the Responses or
    Messages protocol the request speaks."""
    protocol = None if request is None else client_protocol(request.method, request.path)
    body = (
        error_body(message, type_, status)
        if protocol is None
        else protocol.error_body(status, message)
    )
    return web.Response(status=status, body=body, content_type="application/json")


@web.middleware
async def request_id_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    given = request.headers.get("X-Request-Id", "")
    request_id = given if _CLIENT_ID.fullmatch(given) else uuid.uuid4().hex
    request[REQUEST_ID] = request_id
    try:
        response = await handler(request)
    except web.HTTPException as exc:
        exc.headers["X-Request-Id"] = request_id
        raise
    if not response.prepared:
        response.headers["X-Request-Id"] = request_id
    return response


@web.middleware
async def request_line_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Refuse what aiohttp's parser accepts but this proxy must not serve (inside the error
    middleware, which answers and closes the connection)."""
    if request.version.major != 1:  # "GET /" without a version is parsed as HTTP/0.9
        raise NotHTTP1(
            f"HTTP/{request.version.major}.{request.version.minor} is not served here;"
            " send HTTP/1.1 or HTTP/1.0"
        )
    if request.method == hdrs.METH_CONNECT:
        raise MethodNotAllowed("CONNECT is not allowed: this is not a forward proxy")
    return await handler(request)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn errors raised before the response started into JSON with the right status."""
    try:
        return await handler(request)
    except ProxyError as exc:
        if exc.status >= 500:
            log.warning("%s %s: %s", request.method, request.path, exc.message)
        response = error_response(exc.status, exc.message, exc.type, request)
        response.headers.extend(exc.headers)
        if exc.closes_connection:
            return await _answer_and_close(request, response)
        return response
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(exc.status, exc.reason, "invalid_request_error", request)


async def _answer_and_close(request: web.Request, response: web.Response) -> web.Response:
    """Send the answer now, then close the connection.

    Left to aiohttp, a response to a request whose body was not read whole is followed by up to
    10 s of "lingering" reads of that body, which is right for a body that is still coming (a
    413: the client reads the answer instead of a reset) and a waste for one that is not.
    """
    response.force_close()
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    await response.prepare(request)
    await response.write_eof()
    request.protocol.force_close()  # the answer is flushed before the socket closes
    return response
