"""What one large translated request costs the proxy: peak memory, CPU, and the event loop.

``python -m bench.translate_request`` starts the proxy (``python -m proxy``, from
``--proxy-dir``, this checkout by default) in front of a chat upstream in this process that
reads the translated body and answers a short stream. It sends one Responses or Messages
request of ``--count`` tiny tools (1.5 million make about 53 MiB, issue 26 item 4; or, with
``--shape``, tools with large schemas, or conversation turns) and, while
the proxy works on it, asks ``/-/health`` every 10 ms: the longest wait for an answer is how
long the event loop was blocked. It prints the body's size, the status, the proxy's RSS after
start and its peak (VmHWM), the CPU the request cost and that longest wait.

``--protocol chat`` sends the same shape to ``/v1/chat/completions``, which the proxy only
parses and routes: the parse's own cost, to compare with. ``--max-tools`` sets
``limits.max_tools`` (0: leave the default). The status says whether the
proxy served the request (200) or refused it (400, past ``limits.max_tools``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from time import perf_counter

import aiohttp
import orjson
from aiohttp import web

from bench.procstat import cpu_seconds
from bench.request_rss import rss_mib
from bench.targets import ROOT, Server, free_port

STREAM = (
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}\n\n'
    b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
    b"data: [DONE]\n\n"
)


SHAPES = ("tiny-tools", "big-tools", "many-turns")


def request_body(protocol: str, shape: str, count: int) -> bytes:
    """``count`` tiny tools; or ``count`` tools each with a schema of 52 KB of descriptions;
    or ``count`` short conversation turns and no tools."""
    schema = b"{}"
    if shape == "big-tools":
        prop = b'"p%d":{"type":"string","description":"' + b"d" * 500 + b'"}'
        schema = b'{"type":"object","properties":{%s}}' % b",".join(prop % n for n in range(100))
    if protocol in ("responses", "chat"):  # chat: the same bytes, which it parses and routes
        tool = b'{"type":"function","name":"f%d","parameters":' + schema + b"}"
        if shape == "tiny-tools":
            tool = b'{"type":"function","name":"f%d"}'  # issue 26's: 1.5 million in 53 MiB
        turn = b'{"role":"user","content":"turn %d"}'
        head = b'{"model":"m","stream":true,'
    else:
        tool = b'{"name":"f%d","input_schema":' + schema + b"}"
        turn = b'{"role":"user","content":[{"type":"text","text":"turn %d"}]}'
        head = b'{"model":"m","stream":true,"max_tokens":16,'
    key = b'"input"' if protocol == "responses" else b'"messages"'
    if shape == "many-turns":
        return head + key + b":[" + b",".join(turn % n for n in range(count)) + b"]}"
    tools = b",".join(tool % n for n in range(count))
    return head + key + b':[{"role":"user","content":"hi"}],"tools":[' + tools + b"]}"


async def measure(proxy_dir: Path, protocol: str, shape: str, count: int, max_tools: int) -> None:
    async def upstream(request: web.Request) -> web.StreamResponse:
        while await request.content.readany():
            pass
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(STREAM)
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", upstream)
    runner = web.AppRunner(app)
    await runner.setup()
    up_port = free_port()
    await web.TCPSite(runner, "127.0.0.1", up_port).start()
    body = request_body(protocol, shape, count)
    os.environ.update(
        {
            "TOOLCALL_PROXY_UPSTREAMS": orjson.dumps(
                [{"name": "u", "url": f"http://127.0.0.1:{up_port}"}]
            ).decode(),
            "TOOLCALL_PROXY_LIMITS__MAX_REQUEST_BODY_BYTES": str(len(body) + (1 << 20)),
            "TOOLCALL_PROXY_LOG_LEVEL": "warning",
        }
    )
    if max_tools:
        os.environ["TOOLCALL_PROXY_LIMITS__MAX_TOOLS"] = str(max_tools)
    port = free_port()
    argv = [sys.executable, "-m", "proxy", "--port", str(port)]
    with tempfile.TemporaryDirectory() as work:
        proxy = Server("proxy", argv, port, Path(work), 30, cwd=proxy_dir)
        try:
            await asyncio.sleep(1)
            pid = proxy.proc.pid
            before = rss_mib(pid, "VmRSS")
            cpu_before = cpu_seconds([pid])
            async with aiohttp.ClientSession() as session:
                done = asyncio.Event()

                async def probe() -> float:
                    worst = 0.0
                    while not done.is_set():
                        started = perf_counter()
                        async with session.get(f"http://127.0.0.1:{port}/-/health") as resp:
                            await resp.read()
                        worst = max(worst, perf_counter() - started)
                        await asyncio.sleep(0.01)
                    return worst

                async def post() -> tuple[int, bytes]:
                    path = "chat/completions" if protocol == "chat" else protocol
                    url = f"http://127.0.0.1:{port}/v1/{path}"
                    headers = {"Content-Type": "application/json"}
                    try:
                        async with session.post(url, data=body, headers=headers) as resp:
                            return resp.status, await resp.read()
                    finally:
                        done.set()

                prober = asyncio.create_task(probe())
                status, answer = await post()
                worst = await prober
            cpu = cpu_seconds([pid]) - cpu_before
            peak = rss_mib(pid, "VmHWM")
        finally:
            proxy.stop()
    await runner.cleanup()
    mib = len(body) / (1 << 20)
    print(
        f"{proxy_dir}: {protocol}, {shape} x {count}, {mib:.1f} MiB body: status {status}"
        f"{f' ({answer[:100]!r})' if status >= 400 else ''};"
        f" RSS {before:.0f} MiB after start, peak {peak:.0f} MiB"
        f" ({(peak - before) / mib:.1f}x the body); CPU {cpu:.2f} s;"
        f" longest /-/health wait {worst * 1000:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.translate_request", description=__doc__)
    parser.add_argument("--proxy-dir", type=Path, default=ROOT)
    parser.add_argument(
        "--protocol", choices=["responses", "messages", "chat"], default="responses"
    )
    parser.add_argument("--shape", choices=SHAPES, default="tiny-tools")
    parser.add_argument("--count", type=int, default=1_500_000)
    parser.add_argument("--max-tools", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(measure(args.proxy_dir, args.protocol, args.shape, args.count, args.max_tools))


if __name__ == "__main__":
    main()
