"""Fake OpenAI-compatible upstream: streams the shape named by the request's model.

``python -m bench.upstream --port P``. Chunks are paced on an absolute schedule (chunk k at
start + k * delay), so a slow reader or a busy machine does not stretch a stream's nominal
rate; with a delay of 0 it still yields to the loop between chunks so streams interleave.
``/v1/responses`` and ``/v1/messages`` stream the same shapes natively (bench/native_shapes.py),
one event per write on the same schedule.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import orjson
from aiohttp import web

from bench import serve
from bench.native_shapes import NATIVE_PROTOCOLS, SlotTemplate, native_templates
from bench.shapes import parse_model, templates
from bench.stamps import stamp

Stream = tuple[Sequence[Any], Callable[[Any], bytes]]  # events, and what renders one when sent


def _chat(model: str) -> Stream:
    return templates(model), lambda t: t.event(stamp())


def _native(protocol: str) -> Callable[[str], Stream]:
    def stream(model: str) -> Stream:
        stamps: list[bytes] = []  # sent so far: a Responses stream repeats them in its ends

        def render(t: SlotTemplate) -> bytes:
            if t.fresh:
                stamps.append(stamp())
            return t.event(stamps)

        return native_templates(protocol, model), render

    return stream


def _handler(stream: Callable[[str], Stream]):
    async def handle(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        req = parse_model(model)
        if req is None or not body.get("stream"):
            return web.json_response({"error": {"message": f"unknown model {model!r}"}}, status=400)
        events, render = stream(model)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        delay = req.delay_ms / 1000
        start = loop.time()
        try:
            for k, t in enumerate(events):
                if k:
                    await asyncio.sleep(max(0.0, start + k * delay - loop.time()))
                await resp.write(render(t))
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the load generator hung up at its deadline
        return resp

    return handle


def create_app() -> web.Application:
    app = web.Application()
    routes = {"chat/completions": _handler(_chat)}
    routes |= {name: _handler(_native(name)) for name in NATIVE_PROTOCOLS}
    for path, handler in routes.items():
        app.router.add_post(f"/v1/{path}", handler)
        app.router.add_post(f"/{path}", handler)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    serve.run(serve.serve(create_app(), parser.parse_args().port))


if __name__ == "__main__":
    main()
