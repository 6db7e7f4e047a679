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
import logging
from collections.abc import Callable
from time import perf_counter
from types import TracebackType
from typing import Protocol

from aiohttp import ClientError, ClientPayloadError, ClientResponse, web
from aiohttp.http_exceptions import HttpProcessingError

from proxy.meter import StreamMeter
from proxy.sse import Event, RawBytes, SSEDecoder

log = logging.getLogger("toolcall_proxy")


class StreamRewriter(Protocol):
    """The core's side of a rewritten stream (the normalizer)."""

    def feed(self, item: Event | RawBytes) -> list[bytes]: ...

    def close(self, *, complete: bool) -> list[bytes]: ...


class End(enum.Enum):
    COMPLETE = "complete"  # the upstream body ended as its framing said it would
    DROPPED = "dropped"  # the upstream connection closed or reset mid-body
    IDLE_TIMEOUT = "idle_timeout"  # no upstream bytes for timeouts.idle seconds


class _IdleTimeout:
    """``asyncio.timeout`` for "a read waited ``idle`` seconds for the upstream".

    Moving a deadline on every read costs a timer handle and a heap push per chunk. Instead
    the pump notes when its current read began (``waiting_since``, None while it writes to
    the client), and one timer, armed once per idle period, reads that note: it expires the
    deadline (the read is cancelled and the ``async with`` raises TimeoutError) or re-arms.
    """

    __slots__ = ("_deadline", "_handle", "_idle", "_loop", "waiting_since")

    def __init__(self, idle: float) -> None:
        self._idle = idle
        self._deadline = asyncio.timeout(None)
        self.waiting_since: float | None = None

    async def __aenter__(self) -> _IdleTimeout:
        await self._deadline.__aenter__()
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_later(self._idle, self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._handle.cancel()
        await self._deadline.__aexit__(exc_type, exc, tb)

    def _check(self) -> None:
        now = self._loop.time()
        since = self.waiting_since
        if since is not None and now - since >= self._idle:
            self._deadline.reschedule(now)
        else:
            start = now if since is None else since
            self._handle = self._loop.call_at(start + self._idle, self._check)


async def pump(
    upstream: ClientResponse,
    downstream: web.StreamResponse,
    *,
    idle_timeout: float,
    rewriter: StreamRewriter | None = None,
    max_event_bytes: int,
    meter: StreamMeter | None = None,
) -> End:
    """Copy the upstream body to the client until it ends; return how it ended."""
    meter = StreamMeter() if meter is None else meter
    decoder = SSEDecoder(max_event_bytes=max_event_bytes) if rewriter is not None else None
    was_reset = watch_connection(upstream)
    loop = asyncio.get_running_loop()
    end = End.COMPLETE
    try:
        async with _IdleTimeout(idle_timeout) as idle:
            while True:
                idle.waiting_since = loop.time()
                try:
                    chunk = await upstream.content.readany()
                except (ClientError, HttpProcessingError):
                    end = End.DROPPED
                    break
                # The idle timeout watches the upstream only: a slow client is backpressure.
                idle.waiting_since = None
                if not chunk:
                    if was_reset():
                        end = End.DROPPED
                    break
                if decoder is None or rewriter is None:
                    meter.relayed(chunk)
                    await downstream.write(chunk)
                    continue
                meter.received(chunk)
                started = perf_counter()
                passthrough = decoder.passthrough
                out = [b for item in decoder.feed(chunk) for b in rewriter.feed(item)]
                meter.processing.append(perf_counter() - started)
                if decoder.passthrough and not passthrough:
                    log.warning(
                        "an upstream event is larger than limits.max_event_bytes (%d bytes);"
                        " forwarding the rest of the stream unparsed",
                        max_event_bytes,
                    )
                if out:
                    data = b"".join(out)
                    meter.sending(data)
                    await downstream.write(data)
    except TimeoutError:
        end = End.IDLE_TIMEOUT
    if decoder is not None and rewriter is not None:
        started = perf_counter()
        out = [b for item in decoder.close() for b in rewriter.feed(item)]
        out += rewriter.close(complete=end is End.COMPLETE)
        meter.processing.append(perf_counter() - started)
        if out:
            data = b"".join(out)
            meter.sending(data)
            await downstream.write(data)
    return end


def watch_connection(upstream: ClientResponse) -> Callable[[], bool]:
    """Make a dead upstream connection visible to the body reader; return "was it reset?".

    Two things aiohttp's reader does not say on its own (aiohttp 3.14): a framing error in
    the middle of a chunked body closes the connection without waking the reader, which would
    then wait for the idle timeout; and a close-delimited body (no length, not chunked) ends
    the same way whether the upstream closed cleanly or reset the connection. The protocol's
    ``closed`` future knows both, so the body is failed when the connection dies under it,
    and a reset counts as a drop for a close-delimited body.
    """
    connection = upstream.connection
    protocol = connection.protocol if connection is not None else None
    closed = protocol.closed if protocol is not None else None
    if closed is None:  # the whole body already arrived
        return lambda: False

    def on_closed(future: asyncio.Future[None]) -> None:
        cause = None if future.cancelled() else future.exception()
        content = upstream.content
        if not content.is_eof() and content.exception() is None:
            content.set_exception(ClientPayloadError(f"upstream connection lost ({cause!r})"))

    closed.add_done_callback(on_closed)
    close_delimited = (
        "Content-Length" not in upstream.headers
        and "chunked" not in upstream.headers.get("Transfer-Encoding", "").lower()
    )

    def was_reset() -> bool:
        return (
            close_delimited
            and closed.done()
            and not closed.cancelled()
            and closed.exception() is not None
        )

    return was_reset
