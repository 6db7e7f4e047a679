"""The floor for any aiohttp proxy: copy each upstream read to the client, parse nothing.

``python -m bench.bare --upstream http://127.0.0.1:U --port P``. One shared ClientSession,
hop-by-hop headers dropped, the body streamed read by read. A real proxy can only cost more.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator

from aiohttp import ClientSession, TCPConnector, web

from bench import serve

_HOP = frozenset(
    ("connection", "keep-alive", "transfer-encoding", "content-length", "host", "upgrade")
)
UPSTREAM = web.AppKey("upstream", str)
SESSION = web.AppKey("session", ClientSession)


async def forward(request: web.Request) -> web.StreamResponse:
    headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
    url = request.app[UPSTREAM] + request.rel_url.path_qs
    async with request.app[SESSION].request(
        request.method, url, headers=headers, data=await request.read()
    ) as up:
        resp = web.StreamResponse(
            status=up.status,
            headers={k: v for k, v in up.headers.items() if k.lower() not in _HOP},
        )
        await resp.prepare(request)
        async for data in up.content.iter_any():
            await resp.write(data)
        await resp.write_eof()
        return resp


def create_app(upstream: str) -> web.Application:
    async def session(app: web.Application) -> AsyncIterator[None]:
        async with ClientSession(connector=TCPConnector(limit=0), auto_decompress=False) as s:
            app[SESSION] = s
            yield

    app = web.Application()
    app[UPSTREAM] = upstream.rstrip("/")
    app.cleanup_ctx.append(session)
    app.router.add_route("*", "/{tail:.*}", forward)
    return app


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--upstream", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop")
    args = parser.parse_args()
    serve.run(serve.serve(create_app(args.upstream), args.port), args.loop)


if __name__ == "__main__":
    main()
