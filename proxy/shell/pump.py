"""The one loop on the streaming path: upstream reads -> (optional rewriting core) -> client.

The pump decides nothing about tool calls. Without a transform each upstream read is written
to the client as it is, at once. With one (the core's SSE decoder and normalizer, or a bridge
to another protocol), reads go through it, and whatever it releases is written at once;
nothing waits for the next read.

How a stream ends decides what the client sees:
* the upstream body completed (last chunk of a chunked body, full Content-Length, or close of
  a close-delimited body): the transform closes cleanly (it may add a finish chunk and
  ``[DONE]``), and the response ends normally;
* the upstream dropped, stalled past the idle timeout, or broke the framing: everything
  received so far (and whatever the transform held) is written, then the caller aborts the
  client connection so the client sees a truncated stream, never a clean end;
* the client read nothing for the client write timeout: the caller aborts its connection;
* the transform says it is ``over`` (a translated response that failed, its failure event
  written): no upstream byte can change what the client gets, so the rest of the upstream's
  body is not read; the response ends there and the upstream connection is closed.

One stream must not freeze the others: a read can carry a lot of rewriting (an upstream that
always has data buffered fills each read, up to a few hundred KB of small events), and an
``await`` on data that is already there, or on a write the socket takes at once, never lets
the loop run anything else. So a read is rewritten in slices (``SLICE_BYTES``, cut where
events end), and once the rewriting since the pump last stepped aside reaches
``TURN_SECONDS``, what is ready is written and the pump yields to the loop.

What a transform gives back at once is written as one piece when it is small, and piece by
piece when it is large (an event that repeats a long text may share that text's bytes with
others: joining them would copy it again, ``JOIN_MAX_BYTES``).
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from time import perf_counter
from types import TracebackType
from typing import Final, Protocol

from aiohttp import ClientError, ClientPayloadError, ClientResponse, web
from aiohttp.http_exceptions import HttpProcessingError

from proxy.core.sse import slices
from proxy.shell.meter import StreamMeter

SLICE_BYTES = 16 * 1024  # about 50 rewritten events of old llama.cpp's, 1-2 ms of work
TURN_SECONDS = 0.002  # rewriting between two chances for the loop to run other tasks
JOIN_MAX_BYTES = 1 << 20  # larger output is written piece by piece, not copied into one


class BodyTransform(Protocol):
    """The core's side of a rewritten stream: upstream reads in, client bytes out
    (proxy.core.protocols.chat.sse_stream.ChatSSEStream, proxy.core.bridge.ChatBridge, a
    protocol's native stream)."""

    def feed(self, chunk: bytes) -> list[bytes]: ...

    def close(self, *, complete: bool) -> list[bytes]: ...

    @property
    def over(self) -> bool:
        """The client's response is over (its failure event written): read no more."""
        ...


class _NoTransform:
    """Stands for no transform where one is asked whether it is over (never: passthrough)."""

    over = False

    def feed(self, chunk: bytes) -> list[bytes]:
        return [chunk]

    def close(self, *, complete: bool) -> list[bytes]:
        return []


_NO_TRANSFORM: Final = _NoTransform()


class End(enum.Enum):
    COMPLETE = "complete"  # the upstream body ended as its framing said it would
    DROPPED = "dropped"  # the upstream connection closed or reset mid-body
    IDLE_TIMEOUT = "idle_timeout"  # no upstream bytes for timeouts.idle seconds
    CLIENT_STALLED = "client_stalled"  # a write waited timeouts.client_write for the client
    REWRITE_FAILED = "rewrite_failed"  # the transform ended the response (``over``)


class _Watchdog:
    """``asyncio.timeout`` for the two waits of the loop: a read that waited ``idle`` seconds
    for the upstream, and a write that waited ``client_write`` seconds for the client.

    Moving a deadline on every read and write costs a timer handle and a heap push per chunk.
    Instead the pump notes when its current wait began and which one it is, and one timer,
    armed once per period, reads that note: it expires the deadline (the wait is cancelled
    and the ``async with`` raises TimeoutError) or re-arms for the current wait's end.
    """

    __slots__ = ("_deadline", "_handle", "_idle", "_loop", "_write", "limit", "reading", "since")

    def __init__(self, idle: float, client_write: float) -> None:
        self._idle = idle
        self._write = client_write
        self._deadline = asyncio.timeout(None)
        self.since = 0.0
        self.limit = idle
        self.reading = True

    async def __aenter__(self) -> _Watchdog:
        await self._deadline.__aenter__()
        self._loop = asyncio.get_running_loop()
        self.since = self._loop.time()
        self._handle = self._loop.call_at(self.since + self._idle, self._check)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._handle.cancel()
        await self._deadline.__aexit__(exc_type, exc, tb)

    def wait(self, *, reading: bool) -> None:
        """A new wait begins: for the upstream (``reading``) or for the client."""
        self.since = now = self._loop.time()
        self.reading = reading
        self.limit = self._idle if reading else self._write
        if now + self.limit < self._handle.when():  # a shorter wait than the timer covers
            self._handle.cancel()
            self._handle = self._loop.call_at(now + self.limit, self._check)

    def _check(self) -> None:
        now = self._loop.time()
        if now - self.since >= self.limit:
            self._deadline.reschedule(now)
        else:
            self._handle = self._loop.call_at(self.since + self.limit, self._check)


async def pump(
    upstream: ClientResponse,
    downstream: web.StreamResponse,
    *,
    idle_timeout: float,
    client_write_timeout: float,
    transform: BodyTransform | None = None,
    meter: StreamMeter | None = None,
) -> End:
    """Copy the upstream body to the client until it ends; return how it ended."""
    meter = StreamMeter() if meter is None else meter
    was_reset = watch_connection(upstream)
    end = End.COMPLETE
    watchdog = _Watchdog(idle_timeout, client_write_timeout)
    feed = transform.feed if transform is not None else None
    rewriting: BodyTransform = transform if transform is not None else _NO_TRANSFORM
    spent = 0.0  # rewriting since the loop last ran other tasks
    try:
        async with watchdog:
            while True:
                watchdog.wait(reading=True)
                try:
                    chunk = await upstream.content.readany()
                except (ClientError, HttpProcessingError):
                    end = End.DROPPED
                    break
                # A client that reads slowly is backpressure (the upstream waits with it);
                # one that reads nothing at all for client_write_timeout is given up on, so
                # that it cannot hold a stream, its memory and its upstream slot forever.
                watchdog.wait(reading=False)
                if not chunk:
                    if was_reset():
                        end = End.DROPPED
                    break
                if feed is None:
                    meter.relayed(chunk)
                    await downstream.write(chunk)
                    continue
                meter.received(chunk)
                if len(chunk) > SLICE_BYTES:
                    spent = await _rewrite_slices(rewriting, chunk, downstream, meter, spent)
                else:
                    # The usual read, one slice, is rewritten here: a coroutine for it would
                    # cost more than the rewriting of a read that needs nothing.
                    started = perf_counter()
                    out = feed(chunk)
                    took = perf_counter() - started
                    if out:
                        if len(out) == 1:
                            data = out[0]
                        elif sum(map(len, out)) <= JOIN_MAX_BYTES:
                            data = b"".join(out)
                        else:
                            data = b""
                            await _write(out, downstream, meter)
                        if data:
                            meter.sending(data)
                            await downstream.write(data)
                    spent += took
                    if spent >= TURN_SECONDS:
                        await asyncio.sleep(0)
                        spent = 0.0
                    meter.processing.append(took)
                if rewriting.over:
                    end = End.REWRITE_FAILED
                    break
    except TimeoutError:
        end = End.IDLE_TIMEOUT if watchdog.reading else End.CLIENT_STALLED
    if transform is not None and end is not End.CLIENT_STALLED:
        started = perf_counter()
        out = transform.close(complete=end is End.COMPLETE)
        meter.processing.append(perf_counter() - started)
        if out:
            try:
                async with asyncio.timeout(client_write_timeout):
                    await _write(out, downstream, meter)
            except TimeoutError:
                end = End.CLIENT_STALLED
    return end


async def _rewrite_slices(
    transform: BodyTransform,
    chunk: bytes,
    downstream: web.StreamResponse,
    meter: StreamMeter,
    spent: float,
) -> float:
    """Rewrite a read larger than a slice and write what it releases, stepping aside for the
    loop's other tasks after every ``TURN_SECONDS`` of rewriting; returns the rewriting since
    the loop last ran them. The work is counted across reads (``spent``, the pump's): a read
    that waited for the upstream let the loop run, but counting it anyway costs at most one
    extra turn of the loop per ``TURN_SECONDS``."""
    took = 0.0
    out: list[bytes] = []
    for part in slices(chunk, SLICE_BYTES):
        if transform.over:
            break
        started = perf_counter()
        out += transform.feed(part)
        part_took = perf_counter() - started
        took += part_took
        spent += part_took
        if spent >= TURN_SECONDS:
            await _write(out, downstream, meter)
            out = []
            await asyncio.sleep(0)
            spent = 0.0
    meter.processing.append(took)
    await _write(out, downstream, meter)
    return spent


async def _write(out: list[bytes], downstream: web.StreamResponse, meter: StreamMeter) -> None:
    if len(out) > 1 and sum(map(len, out)) > JOIN_MAX_BYTES:
        for piece in out:
            meter.sending(piece)
            await downstream.write(piece)
    elif out:
        data = out[0] if len(out) == 1 else b"".join(out)
        meter.sending(data)
        await downstream.write(data)


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
