"""What large JSON request bodies cost the proxy in memory: its resident set, before and at peak.

``python -m bench.request_rss`` starts the proxy (``python -m proxy``, from ``--proxy-dir``, this
checkout by default) in front of an upstream in this process that reads each body, throws it
away, and answers only once every body has arrived, so that the proxy holds all of them at
once. It prints the proxy's RSS after start and its peak RSS (VmHWM) after the requests.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

import aiohttp
import orjson
from aiohttp import web

from bench.targets import ROOT, Server, free_port


def rss_mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {field} for {pid}")


async def measure(proxy_dir: Path, count: int, size: int) -> None:
    arrived = 0
    all_in = asyncio.Event()

    async def upstream(request: web.Request) -> web.Response:
        nonlocal arrived
        while await request.content.readany():
            pass
        arrived += 1
        if arrived == count:
            all_in.set()
        await all_in.wait()
        return web.json_response({"ok": True})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", upstream)
    runner = web.AppRunner(app)
    await runner.setup()
    up_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", up_port).start()
    port = free_port()
    env = {
        "TOOLCALL_PROXY_UPSTREAMS": orjson.dumps(
            [{"name": "u", "url": f"http://127.0.0.1:{up_port}"}]
        ).decode(),
        "TOOLCALL_PROXY_LIMITS__MAX_REQUEST_BODY_BYTES": str(size + (1 << 20)),
        "TOOLCALL_PROXY_LOG_LEVEL": "warning",
    }
    os.environ.update(env)
    argv = [sys.executable, "-m", "proxy", "--port", str(port)]
    with tempfile.TemporaryDirectory() as work:
        proxy = Server("proxy", argv, port, Path(work), 30, cwd=proxy_dir)
        try:
            await asyncio.sleep(1)
            before = rss_mib(proxy.proc.pid, "VmRSS")
            pad = b"x" * (size - 80)
            body = b'{"model": "m", "messages": [{"role": "user", "content": "%s"}]}' % pad
            async with aiohttp.ClientSession() as session:

                async def post() -> int:
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    headers = {"Content-Type": "application/json"}
                    async with session.post(url, data=body, headers=headers) as resp:
                        await resp.read()
                        return resp.status

                statuses = await asyncio.gather(*(post() for _ in range(count)))
            peak = rss_mib(proxy.proc.pid, "VmHWM")
        finally:
            proxy.stop()
    await runner.cleanup()
    mb = size / 1e6
    print(
        f"{proxy_dir}: {count} concurrent {mb:.0f} MB JSON bodies, statuses {statuses}:"
        f" RSS {before:.0f} MiB after start, peak {peak:.0f} MiB;"
        f" {(peak - before) * 1.048576 / (count * mb):.2f}x the body per request"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.request_rss", description=__doc__)
    parser.add_argument("--proxy-dir", type=Path, default=ROOT)
    parser.add_argument("--count", type=int, default=4)
    parser.add_argument("--megabytes", type=int, default=60)
    args = parser.parse_args()
    asyncio.run(measure(args.proxy_dir, args.count, args.megabytes * 1_000_000))


if __name__ == "__main__":
    main()
