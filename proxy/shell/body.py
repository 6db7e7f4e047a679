"""Reading the request body the proxy needs for routing: bounded in size, time and memory.

A JSON body is read whole, because its ``model`` chooses the upstream. Three bounds apply:

- size: a ``Content-Length`` above ``limits.max_request_body_bytes`` is 413 before a byte is
  read; a body without one (chunked) is 413 as soon as it passes the limit;
- time: the whole body must arrive within ``timeouts.request_body`` of its headers, or the
  client gets 408 and its connection is closed (a client that sends a length and then goes
  silent would otherwise hold it for as long as it likes);
- memory: the body is kept once, as read, and forwarded as those bytes; the parsed JSON lives
  only until the few fields the proxy uses (:class:`BodyFacts`) are taken out of it, so a
  request costs about one copy of its body, not three.

Uploads (multipart, audio, images, octet streams) are not read here: they stream through to
the upstream, which bounds their size.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Final

import orjson
from aiohttp import hdrs, web

from proxy.core.errors import ClientRequestError, PayloadTooLarge, RequestTimeout
from proxy.core.options import RequestInfo

# Bodies of these types are streamed to the upstream without being read for routing.
STREAMED_BODY_TYPES: Final = (
    "multipart/",
    "application/octet-stream",
    "audio/",
    "image/",
    "video/",
)


@dataclass(frozen=True, slots=True)
class BodyFacts:
    """What the proxy takes from a JSON request body; the parsed body itself is not kept."""

    model: str | None
    info: RequestInfo


NO_FACTS: Final = BodyFacts(model=None, info=RequestInfo())


async def read_body(
    request: web.Request, *, limit: int, time_limit: float
) -> tuple[bytes | bytearray | None, BodyFacts]:
    """The body to forward (None: stream it through unread) and what it says."""
    if not request.body_exists:
        return b"", NO_FACTS
    content_type = request.headers.get(hdrs.CONTENT_TYPE, "").lower()
    if content_type.startswith(STREAMED_BODY_TYPES):
        return None, NO_FACTS
    if request.content_length is not None and request.content_length > limit:
        raise PayloadTooLarge(_too_large(limit))
    body = bytearray()
    try:
        async with asyncio.timeout(time_limit):
            while chunk := await request.content.readany():
                body += chunk
                if len(body) > limit:
                    raise PayloadTooLarge(_too_large(limit))
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {time_limit:g} s"
            " (timeouts.request_body); closing the connection"
        ) from None
    except web.RequestPayloadError as exc:  # a broken chunked encoding, a body cut short
        raise ClientRequestError(f"the request body is malformed: {exc}") from None
    return body, facts(body)


def facts(body: bytes | bytearray) -> BodyFacts:
    try:
        payload = orjson.loads(body)
    except orjson.JSONDecodeError:
        return NO_FACTS
    if not isinstance(payload, dict):
        return NO_FACTS
    model = payload.get("model")
    # The parsed body goes out of scope on return: only the model and the tools stay alive.
    return BodyFacts(
        model=model if isinstance(model, str) else None, info=RequestInfo.from_body(payload)
    )


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes (limits.max_request_body_bytes)"
