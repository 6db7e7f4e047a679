"""When SIGTERM cuts a stream that outlives the grace period: seconds from the signal to the cut.

``python -m bench.shutdown_cut --grace 3`` starts the proxy (``python -m proxy``, from
``--proxy-dir``, this checkout by default; ``--workers N``) in front of an upstream in this
process whose streams send one event and then wait forever, opens ``--streams`` of them, sends
SIGTERM and prints when each client saw its stream cut, and when the proxy exited.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import sys
import tempfile
from pathlib import Path
from time import monotonic

import aiohttp
import orjson
from aiohttp import web

from bench.targets import ROOT, Server, free_port


async def measure(proxy_dir: Path, grace: float, workers: int, streams: int) -> None:
    async def held(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"n": 1}\n\n')
        await asyncio.Event().wait()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", held)
    runner = web.AppRunner(app)
    await runner.setup()
    up_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", up_port).start()
    os.environ.update(
        {
            "TOOLCALL_PROXY_UPSTREAMS": orjson.dumps(
                [{"name": "u", "url": f"http://127.0.0.1:{up_port}"}]
            ).decode(),
            "TOOLCALL_PROXY_TIMEOUTS__SHUTDOWN_GRACE": str(grace),
            "TOOLCALL_PROXY_LOG_LEVEL": "warning",
        }
    )
    port = free_port()
    argv = [sys.executable, "-m", "proxy", "--port", str(port), "--workers", str(workers)]
    with tempfile.TemporaryDirectory() as work:
        proxy = Server("proxy", argv, port, Path(work), 30, cwd=proxy_dir)
        await asyncio.sleep(1 if workers == 1 else 3)
        connector = aiohttp.TCPConnector(force_close=True, limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            opened = []
            for _ in range(streams):
                resp = await session.post(
                    f"http://127.0.0.1:{port}/v1/chat/completions",
                    json={"model": "m", "stream": True},
                )
                await resp.content.readuntil(b"\n\n")
                opened.append(resp)
            signalled = monotonic()
            proxy.proc.send_signal(signal.SIGTERM)

            async def cut(resp: aiohttp.ClientResponse) -> float:
                with contextlib.suppress(aiohttp.ClientError):
                    await resp.read()
                return monotonic() - signalled

            cuts = await asyncio.gather(*(cut(resp) for resp in opened))
        exited = await asyncio.to_thread(proxy.proc.wait, 120)
        took = monotonic() - signalled
    await runner.cleanup()
    print(
        f"{proxy_dir}: grace {grace:g} s, {workers} worker(s): streams cut after"
        f" {min(cuts):.2f}-{max(cuts):.2f} s; exit {exited} after {took:.2f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.shutdown_cut", description=__doc__)
    parser.add_argument("--proxy-dir", type=Path, default=ROOT)
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--streams", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(measure(args.proxy_dir, args.grace, args.workers, args.streams))


if __name__ == "__main__":
    main()
