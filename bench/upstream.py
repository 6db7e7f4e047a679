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
from collections.abc import Awaitable, Callable

import orjson
from aiohttp import web

from bench import serve
from bench.native_shapes import NATIVE_PROTOCOLS, native_templates
from bench.shapes import completion, parse_model, templates
from bench.stamps import stamp


async def chat_completions(request: web.Request) -> web.StreamResponse:
    body = orjson.loads(await request.read())
    model = body.get("model", "")
    req = parse_model(model)
    if req is None:
        return web.json_response({"error": {"message": f"unknown model {model!r}"}}, status=400)
    if not body.get("stream"):
        return web.Response(body=completion(model, stamp()), content_type="application/json")
    resp = web.StreamResponse(
        headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
    )
    await resp.prepare(request)
    loop = asyncio.get_running_loop()
    delay = req.delay_ms / 1000
    start = loop.time()
    try:
        for k, t in enumerate(templates(model)):
            if k:
                await asyncio.sleep(max(0.0, start + k * delay - loop.time()))
            await resp.write(t.event(stamp()))
        await resp.write_eof()
    except ConnectionResetError:
        pass  # the load generator hung up at its deadline
    return resp


def native(protocol: str) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """The handler of ``/v1/<protocol>``: chat_completions' schedule, the native events; a
    Responses stream's ends say again the stamps sent before them, so they are kept."""

    async def handle(request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        model = body.get("model", "")
        req = parse_model(model)
        if req is None or not body.get("stream"):
            error = {"error": {"message": f"unknown model {model!r}"}}
            return web.json_response(error, status=400)
        resp = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await resp.prepare(request)
        loop = asyncio.get_running_loop()
        delay = req.delay_ms / 1000
        start = loop.time()
        stamps: list[bytes] = []
        try:
            for k, t in enumerate(native_templates(protocol, model)):
                if k:
                    await asyncio.sleep(max(0.0, start + k * delay - loop.time()))
                if t.fresh:
                    stamps.append(stamp())
                await resp.write(t.event(stamps))
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the load generator hung up at its deadline
        return resp

    return handle


def create_app() -> web.Application:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_post("/chat/completions", chat_completions)
    for protocol in NATIVE_PROTOCOLS:
        app.router.add_post(f"/v1/{protocol}", native(protocol))
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    serve.run(serve.serve(create_app(), parser.parse_args().port))


if __name__ == "__main__":
    main()
