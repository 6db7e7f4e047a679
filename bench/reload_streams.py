"""``python -m bench.reload_streams [--streams 100] [--workers 1]``: streams cut by a reload.

Starts a real upstream (aiohttp, in this process) whose streams send ``--events`` events
``--gap`` seconds apart, and the real CLI (``python -m proxy``) in front of it; opens
``--streams`` streams, each on its own connection, rewrites the config file (the upstream's
name stays, a model_map is added, which changes the configuration's hash) and sends SIGHUP
once every stream has its first event, then reads every stream to its end and compares its
bytes with what the upstream sent. Prints how many streams were cut or changed (goal: none)
and how long the reload took to apply.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from aiohttp import web

ROOT = Path(__file__).parents[1]
RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+) ")
APPLIED = re.compile(r"reload: configuration applied|workers serve the new configuration")


def _event(n: int) -> bytes:
    return b'data: {"choices":[{"index":0,"delta":{"content":"w%d "}}]}\n\n' % n


async def _upstream(events: int, gap: float) -> tuple[web.AppRunner, int]:
    async def handler(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for n in range(events):
            await response.write(_event(n))
            await asyncio.sleep(gap)
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, port


async def _wait(log: Path, pattern: re.Pattern[str]) -> re.Match[str]:
    """The first match of ``pattern`` in the proxy's log, polled (a child's stderr file)."""
    async with asyncio.timeout(60):
        while True:
            found = pattern.search(await asyncio.to_thread(log.read_text, errors="replace"))
            if found is not None:
                return found
            await asyncio.sleep(0.02)  # a file another process writes: polled


async def run(streams: int, workers: int, events: int, gap: float) -> dict[str, float]:
    runner, port = await _upstream(events, gap)
    expected = b"".join(_event(n) for n in range(events)) + b"data: [DONE]\n\n"
    with tempfile.TemporaryDirectory() as tmp:
        config, log = Path(tmp) / "proxy.toml", Path(tmp) / "proxy.log"
        base = f'[[upstreams]]\nname = "u"\nurl = "http://127.0.0.1:{port}"\nnormalize = false\n'
        config.write_text(base)
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "proxy", "--config", str(config), "--port", "0",
                "--workers", str(workers),
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=out,
            )  # fmt: skip
        try:
            proxy = f"http://127.0.0.1:{(await _wait(log, RUNNING)).group(1)}"
            if workers > 1:
                await _wait(log, re.compile(rf"(serving \(pid \d+\)[\s\S]*){{{workers}}}"))
            connector = aiohttp.TCPConnector(force_close=True, limit=0)
            async with aiohttp.ClientSession(connector=connector) as session:
                opened = [
                    await session.post(
                        proxy + "/v1/chat/completions", json={"model": "m", "stream": True}
                    )
                    for _ in range(streams)
                ]
                firsts = await asyncio.gather(*(r.content.readuntil(b"\n\n") for r in opened))
                config.write_text(base + 'model_map = { "m" = "m2" }\n')
                signalled = time.monotonic()
                process.send_signal(signal.SIGHUP)
                await _wait(log, APPLIED)
                applied = time.monotonic() - signalled
                results = await asyncio.gather(*(_rest(r) for r in opened))
            cut = sum(1 for _, error in results if error)
            changed = sum(
                1
                for first, (rest, error) in zip(firsts, results, strict=True)
                if not error and first + rest != expected
            )
            return {"streams": streams, "cut": cut, "changed": changed, "applied_s": applied}
        finally:
            process.send_signal(signal.SIGTERM)
            await process.wait()
            await runner.cleanup()


async def _rest(resp: aiohttp.ClientResponse) -> tuple[bytes, BaseException | None]:
    received = bytearray()
    try:
        async for chunk in resp.content.iter_any():
            received += chunk
    except aiohttp.ClientPayloadError as exc:
        return bytes(received), exc
    return bytes(received), None


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.reload_streams", description=__doc__)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--events", type=int, default=60)
    parser.add_argument("--gap", type=float, default=0.05)
    args = parser.parse_args()
    result = asyncio.run(run(args.streams, args.workers, args.events, args.gap))
    print(
        f"workers {args.workers}: {result['streams']:.0f} streams open across a reload,"
        f" {result['cut']:.0f} cut, {result['changed']:.0f} changed;"
        f" applied {result['applied_s']:.2f} s after SIGHUP"
    )


if __name__ == "__main__":
    main()
