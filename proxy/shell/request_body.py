"""Reading the request body the proxy needs for routing: bounded in size, time and memory.

A JSON body is read whole, because its ``model`` chooses the upstream. Three bounds apply:

- size: a ``Content-Length`` above ``limits.max_request_body_bytes`` is 413 before a byte is
  read; a body without one (chunked) is 413 as soon as it passes the limit;
- time: the whole body must arrive within ``timeouts.request_body`` of its headers, or the
  client gets 408 and its connection is closed (a client that sends a length and then goes
  silent would otherwise hold it for as long as it likes);
- memory: the body is kept once, as read, and forwarded as those bytes, in slices
  (:class:`ForwardedBody`) so that the socket's buffer never holds a second copy. The parsed
  JSON is the caller's to drop: a chat completion or passthrough keeps only the few fields
  the proxy uses (its model, and for a chat completion its tools), so it costs about one
  copy of its body, not three.

Uploads (multipart, audio, images, octet streams) are not read here: they stream through to
the upstream, which bounds their size.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any, Final

import orjson
from aiohttp import HttpVersion11, hdrs, web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.payload import Payload

from proxy.core.errors import ClientRequestError, PayloadTooLarge, RequestTimeout

# Bodies of these types are streamed to the upstream without being read for routing.
STREAMED_BODY_TYPES: Final = (
    "multipart/",
    "application/octet-stream",
    "audio/",
    "image/",
    "video/",
)


async def read_body(
    request: web.Request, *, limit: int, time_limit: float
) -> tuple[bytes | bytearray | None, object]:
    """The body to forward (None: stream it through unread) and its parsed JSON (None if not)."""
    if not request.body_exists:
        return b"", None
    content_type = request.headers.get(hdrs.CONTENT_TYPE, "").lower()
    if content_type.startswith(STREAMED_BODY_TYPES):
        return None, None
    if _over(request, limit):
        raise PayloadTooLarge(_too_large(limit))
    try:
        if request.content.is_eof():  # all of it is here (most bodies): no wait to bound
            body = await _read(request, limit)
        else:
            async with asyncio.timeout(time_limit):
                body = await _read(request, limit)
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {time_limit:g} s"
            " (timeouts.request_body); closing the connection"
        ) from None
    except web.RequestPayloadError as exc:  # a broken chunked encoding, a body cut short
        raise ClientRequestError(f"the request body is malformed: {exc}") from None
    return body, parse_json(body)


def parse_json(body: bytes | bytearray) -> object:
    """The body's JSON, or None when it is none.

    The cyclic collector is off for the parse: a large body is millions of new containers,
    and each few hundred thousand of them would start a collection of all the others (5 s
    for the 1.5 million tools of issue 26, 1.3 s without), while JSON has no cycles to find.
    What the parse made is collected as usual afterwards, or freed before that: a body the
    proxy refuses or only routes never meets the collector at all.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    finally:
        if enabled:
            gc.enable()


async def _read(request: web.Request, limit: int) -> bytearray:
    if request.content_length is not None:
        return await _read_exactly(request, request.content_length)
    body = bytearray()
    while chunk := await request.content.readany():
        body += chunk
        if len(body) > limit:
            raise PayloadTooLarge(_too_large(limit))
    return body


async def _read_exactly(request: web.Request, length: int) -> bytearray:
    # Into a buffer of the declared size: a growing one would over-allocate by an eighth and
    # copy itself on the way (the parser ends the body at the declared length).
    body = bytearray(length)
    filled = 0
    while chunk := await request.content.readany():
        body[filled : filled + len(chunk)] = chunk
        filled += len(chunk)
    del body[filled:]  # nothing, unless the parser let a short body through
    return body


def expect_handler(limit: int) -> Callable[[web.Request], Awaitable[None]]:
    """``Expect: 100-continue``: invite the body only when it may be read.

    A declared length over the limit gets no "100 Continue", so the client waits for the 413
    that follows instead of sending the body first (curl asks this way for bodies over 1 MiB).
    """

    async def expect(request: web.Request) -> None:
        if request.headers.get(hdrs.EXPECT, "").lower() != "100-continue":
            raise web.HTTPExpectationFailed(text="only Expect: 100-continue is understood")
        if request.version != HttpVersion11 or _over(request, limit):
            return
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # an interim answer: the response has not started

    return expect


def _over(request: web.Request, limit: int) -> bool:
    length = request.content_length
    content_type = request.headers.get(hdrs.CONTENT_TYPE, "").lower()
    return (
        length is not None and length > limit and not content_type.startswith(STREAMED_BODY_TYPES)
    )


def body_model(payload: object) -> str | None:
    """The model a parsed body names, if it names one."""
    model = payload.get("model") if isinstance(payload, dict) else None
    return model if isinstance(model, str) else None


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes (limits.max_request_body_bytes)"


class ForwardedBody(Payload):
    """The body read from the client, sent upstream as it is, a slice at a time.

    Given the whole body at once, the event loop's transport copies whatever the socket does
    not take at once into its own buffer: most of the body, for as long as the upstream takes
    to read it. Slices, each written once the previous ones drained, keep that copy small.
    Reusable: a request sent again on a fresh connection writes the body again from the start.
    """

    SLICE: Final = 256 << 10
    _autoclose = True  # nothing to close: the body is in memory

    def __init__(self, value: bytes | bytearray, **kwargs: Any) -> None:
        super().__init__(value, **kwargs)
        self._size = len(value)

    def decode(self, encoding: str = "utf-8", errors: str = "strict") -> str:
        return bytes(self._value).decode(encoding, errors)

    async def write(self, writer: AbstractStreamWriter) -> None:
        await self.write_with_length(writer, None)

    async def write_with_length(
        self, writer: AbstractStreamWriter, content_length: int | None
    ) -> None:
        view = memoryview(self._value)[:content_length]
        for start in range(0, len(view), self.SLICE):
            await writer.write(view[start : start + self.SLICE])
