"""SIGTERM's grace period, kept to: at ``timeouts.shutdown_grace`` after the proxy began to stop,
every request still in flight is cancelled, so its client sees the cut then, not later.

aiohttp alone takes twice as long: once the grace is over it cancels only the reading of the
request's body, which a streaming handler is not waiting on, waits the grace a second time for
the handler to notice, and cancels it only then. Here each request's task is known from its
start (the proxy's middleware tracks it); the app's ``on_shutdown`` hook (which aiohttp
runs as it stops listening, before it waits for the open requests) arms one timer, and when
it fires every task still running is cancelled. A cancelled stream goes down as a client's
departure does (proxy.shell.relay): the upstream request is closed, the client's connection is
closed without ending the response, and the access line says ``end: "shutdown"``.
"""

from __future__ import annotations

import asyncio
from typing import Final

from aiohttp import web

from proxy.shell.exchange import EXCHANGE

#: the access line's ``end`` for a request cut at the end of the grace period
SHUTDOWN: Final = "shutdown"


class Drain:
    """The requests in flight, and the timer that cuts them once the grace period is over."""

    def __init__(self, grace: float) -> None:
        self._grace = grace
        self._in_flight: dict[asyncio.Task[object], web.Request] = {}
        self._timer: asyncio.TimerHandle | None = None

    def track(self, task: asyncio.Task[object], request: web.Request) -> None:
        """``request`` runs in ``task`` (the proxy's middleware says so first thing)."""
        self._in_flight[task] = request

    def done(self, task: asyncio.Task[object]) -> None:
        del self._in_flight[task]

    async def on_shutdown(self, app: web.Application) -> None:
        """The proxy stops: what is still running when the grace period ends is cut then."""
        self._timer = asyncio.get_running_loop().call_later(self._grace, self._cut)

    async def on_cleanup(self, app: web.Application) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _cut(self) -> None:
        for task, request in list(self._in_flight.items()):
            exchange = request.get(EXCHANGE)
            if exchange is not None and exchange.end is None:
                exchange.end = SHUTDOWN
            task.cancel()
