"""The one loop on the streaming path: upstream reads -> (optional rewriting core) -> client.

The pump decides nothing about tool calls. Without a rewriter each upstream read is written
to the client as it is, at once. With one, reads go through the SSE decoder and the rewriter,
and whatever they release is written at once; nothing waits for the next read.

How a stream ends decides what the client sees:
* the upstream body completed (last chunk of a chunked body, full Content-Length, or close of
  a close-delimited body): the rewriter closes cleanly (it may add a finish chunk and
  ``[DONE]``), and the response ends normally;
* the upstream dropped, stalled past the idle timeout, or broke the framing: everything
  received so far (and whatever the rewriter held) is written, then the caller aborts the
  client connection so the client sees a truncated stream, never a clean end.
"""

from __future__ import annotations

import asyncio
import enum
from typing import Protocol

from aiohttp import ClientConnectionError, ClientPayloadError, ClientResponse, web

from proxy.sse import Event, RawBytes, SSEDecoder


class StreamRewriter(Protocol):
    """The core's side of a rewritten stream (the normalizer)."""

    def feed(self, item: Event | RawBytes) -> list[bytes]: ...

    def close(self, *, complete: bool) -> list[bytes]: ...


class End(enum.Enum):
    COMPLETE = "complete"  # the upstream body ended as its framing said it would
    DROPPED = "dropped"  # the upstream connection closed or reset mid-body
    IDLE_TIMEOUT = "idle_timeout"  # no upstream bytes for timeouts.idle seconds


async def pump(
    upstream: ClientResponse,
    downstream: web.StreamResponse,
    *,
    idle_timeout: float,
    rewriter: StreamRewriter | None = None,
    max_event_bytes: int,
) -> End:
    """Copy the upstream body to the client until it ends; return how it ended."""
    decoder = SSEDecoder(max_event_bytes=max_event_bytes) if rewriter is not None else None
    loop = asyncio.get_running_loop()
    end = End.COMPLETE
    try:
        async with asyncio.timeout(None) as deadline:
            while True:
                deadline.reschedule(loop.time() + idle_timeout)
                try:
                    chunk = await upstream.content.readany()
                except (ClientPayloadError, ClientConnectionError):
                    end = End.DROPPED
                    break
                # The idle timeout watches the upstream only: a slow client is backpressure.
                deadline.reschedule(None)
                if not chunk:
                    break
                if decoder is None or rewriter is None:
                    await downstream.write(chunk)
                    continue
                out = [b for item in decoder.feed(chunk) for b in rewriter.feed(item)]
                if out:
                    await downstream.write(b"".join(out))
    except TimeoutError:
        end = End.IDLE_TIMEOUT
    if decoder is not None and rewriter is not None:
        out = [b for item in decoder.close() for b in rewriter.feed(item)]
        out += rewriter.close(complete=end is End.COMPLETE)
        if out:
            await downstream.write(b"".join(out))
    return end
