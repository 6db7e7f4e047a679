"""A real upstream on 127.0.0.1 that replays each case's recorded response.

The request's "model" picks the case (after the proxy's route prefix "<route>/", if any). An SSE
body goes out one event per write, as a server generating tokens sends it; any other body (a
non-streaming completion, an error) goes out whole with the case's status and content type.

The server runs on its own event loop in a thread, because the clients under test are driven
synchronously (and from Node subprocesses) while it serves.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Coroutine, Iterable
from typing import Any

from aiohttp import web

from tests.clients.cases import Case

_EVENT_END = re.compile(rb"(?<=\r\n\r\n)|(?<=\n\n)|(?<=\r\r)")


def split_events(body: bytes) -> list[bytes]:
    """The body cut after each blank line, so each piece is one SSE event as sent."""
    return [piece for piece in _EVENT_END.split(body) if piece]


def case_for_model(model: str) -> str:
    return model.rpartition("/")[2]


def replayer_app(cases: Iterable[Case]) -> web.Application:
    by_name = {case.name: case for case in cases}

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        payload = await request.json()
        case = by_name.get(case_for_model(str(payload.get("model"))))
        if case is None:
            return web.json_response(
                {"error": {"message": f"no case for model {payload.get('model')!r}"}}, status=404
            )
        if not case.content_type.startswith("text/event-stream"):
            return web.Response(
                status=case.status, body=case.body, headers={"Content-Type": case.content_type}
            )
        response = web.StreamResponse(
            status=case.status,
            headers={"Content-Type": case.content_type, "Cache-Control": "no-cache"},
        )
        await response.prepare(request)
        try:
            for event in split_events(case.body):
                await response.write(event)
                # Let each event leave as its own read, as a server generating tokens would.
                await asyncio.sleep(0)
            if case.ends == "dropped":
                # The upstream died: the connection breaks before the chunked body's last chunk.
                assert request.transport is not None
                request.transport.abort()
                return response
            await response.write_eof()
        except ConnectionResetError:
            pass  # the client gave up (some raise at the first chunk they cannot parse)
        return response

    async def models(_: web.Request) -> web.Response:
        return web.json_response(
            {"object": "list", "data": [{"id": n, "object": "model"} for n in by_name]}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    return app


class ReplayerThread:
    """Serves `replayer_app` on 127.0.0.1 from a background thread; `url` once started."""

    def __init__(self, cases: Iterable[Case]) -> None:
        self._app = replayer_app(cases)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner = web.AppRunner(self._app, handle_signals=False)
        self.url = ""

    def _call(self, coro: Coroutine[Any, Any, Any]) -> None:
        asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=30)

    def start(self) -> None:
        self._thread.start()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self._call(self._runner.setup())
        self._call(web.SockSite(self._runner, sock).start())
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"

    def stop(self) -> None:
        self._call(self._runner.cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()
