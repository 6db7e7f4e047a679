"""A hand-driven HTTP/1.1 upstream on 127.0.0.1 for faults no well-behaved server produces.

Each connection reads one request head (and its Content-Length body), then runs a *script*:
a coroutine that writes whatever bytes it likes, stalls, closes or resets the connection. The
scripts below build the faults the tests name; a test composes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

SSE_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
NO_PROPS = b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@dataclass
class Conn:
    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    head: bytes = b""
    body: bytes = b""
    closed_by_peer: asyncio.Event = field(default_factory=asyncio.Event)

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    def reset(self) -> None:
        """Abort with a TCP RST (SO_LINGER 0) instead of a FIN."""
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()

    def close(self) -> None:
        self.writer.close()

    async def wait_peer_close(self) -> None:
        """Return once the proxy closed its side (reads EOF or an error)."""
        with contextlib.suppress(ConnectionError):
            while await self.reader.read(65536):
                pass
        self.closed_by_peer.set()


Script = Callable[[Conn], Awaitable[None]]


class RawUpstream:
    def __init__(self, script: Script) -> None:
        self.script = script
        self.conns: list[Conn] = []
        self.errors: list[BaseException] = []
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> RawUpstream:
        self._server = await asyncio.start_server(self._on_conn, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for conn in self.conns:
            conn.writer.transport.abort()
        await self._server.wait_closed()

    async def _on_conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        conn = Conn(reader, writer)
        self.conns.append(conn)
        try:
            conn.head = await reader.readuntil(b"\r\n\r\n")
            if _template_probe(conn.head):
                self.conns.remove(conn)
                # the proxy asks for the chat template at start (issue 23): answered as a
                # server without /props answers, outside the scripts and their connections
                writer.write(NO_PROPS)
                await writer.drain()
                writer.close()
                return
            length = _content_length(conn.head)
            conn.body = await reader.readexactly(length) if length else b""
            await self.script(conn)
        except (asyncio.CancelledError, ConnectionError, asyncio.IncompleteReadError):
            pass
        except Exception as exc:  # a broken script must fail the test, not vanish
            self.errors.append(exc)
        finally:
            self._tasks.discard(task)


def _template_probe(head: bytes) -> bool:
    """The proxy's own GET /props (tests/conftest.py's template_probe)."""
    line, _, rest = head.partition(b"\r\n")
    method, _, target = line.partition(b" ")
    path = target.partition(b" ")[0].partition(b"?")[0]
    return method == b"GET" and path.endswith(b"/props") and b"x-request-id:" not in rest.lower()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


@contextlib.asynccontextmanager
async def raw_upstream(script: Script) -> AsyncIterator[RawUpstream]:
    upstream = await RawUpstream(script).start()
    try:
        yield upstream
    finally:
        await upstream.stop()
    assert not upstream.errors, upstream.errors


# -- body framings: how a response body is delimited, and how each event is written in it --


@dataclass(frozen=True)
class Framing:
    name: str
    head: Callable[[int], bytes]  # total body length -> header lines ending the head
    frame: Callable[[bytes], bytes]
    tail: bytes  # what ends a complete body


CHUNKED = Framing(
    "chunked",
    lambda _: b"Transfer-Encoding: chunked\r\n\r\n",
    lambda data: b"%x\r\n%s\r\n" % (len(data), data),
    b"0\r\n\r\n",
)
LENGTH = Framing(
    "content-length",
    lambda total: b"Content-Length: %d\r\n\r\n" % total,
    lambda data: data,
    b"",
)
CLOSE_DELIMITED = Framing(
    "close-delimited", lambda _: b"Connection: close\r\n\r\n", lambda data: data, b""
)
FRAMINGS = (CHUNKED, LENGTH, CLOSE_DELIMITED)


def stream_then(
    framing: Framing,
    events: list[bytes],
    end: Callable[[Conn], Awaitable[None] | None],
    *,
    declared_total: int | None = None,
) -> Script:
    """Send ``events`` (each flushed, with a pause) in ``framing``, then ``end`` the connection.

    ``declared_total`` is the Content-Length announced, by default more than is sent so that
    ending early is a truncation.
    """

    async def script(conn: Conn) -> None:
        total = declared_total if declared_total is not None else sum(map(len, events)) + 100
        await conn.send(SSE_HEAD + framing.head(total))
        for event in events:
            await conn.send(framing.frame(event))
            await asyncio.sleep(0.02)
        # Let the proxy read what was sent before the end, so a reset cannot discard it.
        await asyncio.sleep(0.05)
        result = end(conn)
        if result is not None:
            await result

    return script
