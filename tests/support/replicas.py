"""Replicas of one model server that a test starts, kills mid-request and starts again
(issue 28): each a real aiohttp server on 127.0.0.1, serving a chat stream that names it.

``kill()`` is a crash, not a shutdown: every open connection is aborted (a stream in flight
breaks off; a request on its way is reset) and the port stops accepting, so the next connect
is refused. ``start()`` again listens on the same port.

What a replica answers is set per test: ``status`` (with ``headers``, for a 429's
``Retry-After``) for the next requests, ``chunks`` and ``pause`` for the stream's pace, and
``health`` for ``GET /health``.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass, field

import orjson
from aiohttp import web


def chunk(text: str) -> bytes:
    return b"data: %s\n\n" % orjson.dumps(
        {
            "id": "c1",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "m",
            "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}],
        }
    )


FINISH = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":'
    b'[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
)


@dataclass(eq=False)
class Replica:
    name: str
    port: int = 0
    chunks: int = 3
    pause: float = 0.0  # between chunks
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    health: int = 200
    requests: int = 0  # chat requests that reached it
    open: int = 0  # streams it is writing now
    bodies: list[bytes] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    _transports: set[asyncio.Transport] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/health", self._health)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.1)
        await self._runner.setup()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        self.port = sock.getsockname()[1]
        site = web.SockSite(self._runner, sock)
        await site.start()

    async def kill(self) -> None:
        """Crash: abort every connection, stop listening."""
        for transport in list(self._transports):
            transport.abort()
        self._transports.clear()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        self._transports.add(request.transport)
        self.requests += 1
        self.bodies.append(await request.read())
        if self.status != 200:
            return web.Response(status=self.status, headers=self.headers, text="busy")
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.open += 1
        try:
            for n in range(self.chunks):
                await response.write(chunk(f"{self.name}:{n} "))
                await asyncio.sleep(self.pause)
            await response.write(FINISH)
        except ConnectionResetError:  # the proxy left (its client did), or the replica died
            pass
        finally:
            self.open -= 1
        return response

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health)

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "m"}]})


async def started(*names: str, **options: object) -> list[Replica]:
    replicas = [Replica(name, **options) for name in names]  # type: ignore[arg-type]
    for replica in replicas:
        await replica.start()
    return replicas
