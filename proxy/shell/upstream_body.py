"""Reading an upstream's response: its media type, a body read up to a cap, and what an
error body says."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
from aiohttp import ClientPayloadError, ClientResponse, hdrs


def media_type(resp: ClientResponse) -> str:
    return resp.headers.get(hdrs.CONTENT_TYPE, "").partition(";")[0].strip().lower()


async def read_capped(
    resp: ClientResponse, limit: int, *, idle: float | None = None
) -> tuple[bytes, bool]:
    """Read the body up to ``limit`` bytes; the flag says whether that was all of it (not when
    the upstream's connection broke off before the body's end, nor when ``idle`` seconds
    passed without a byte)."""
    if resp.content_length is not None and resp.content_length > limit:
        return b"", False
    body = bytearray()
    try:
        while len(body) <= limit:
            if resp.content.is_eof():  # the rest is buffered: this read cannot wait
                chunk = await resp.content.readany()
            else:
                async with asyncio.timeout(idle):
                    chunk = await resp.content.readany()
            if not chunk:
                return bytes(body), True
            body += chunk
    except (ClientPayloadError, TimeoutError):
        pass  # cut off or stalled: what came is kept, and the caller told it is not all
    return bytes(body), False


def upstream_error_message(body: bytes, status: int) -> str:
    """What an upstream's error body says, for the client's protocol's error shape."""
    try:
        value: Any = orjson.loads(body)
    except orjson.JSONDecodeError:
        text = body[:500].decode("utf-8", "replace").strip()
        return text or f"the upstream answered HTTP {status}"
    error = value.get("error") if isinstance(value, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    if isinstance(error, str):
        return error
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return str(value["message"])
    return body[:500].decode("utf-8", "replace")
