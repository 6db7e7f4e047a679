"""Run an aiohttp app on 127.0.0.1 until the process is terminated (the bench's servers)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from aiohttp import web


def run(main: Coroutine[Any, Any, None], loop: str = "uvloop") -> None:
    """Run on uvloop when it is installed: the bench's own servers should cost little."""
    try:
        import uvloop
    except ImportError:
        loop = "asyncio"
    if loop == "uvloop":
        uvloop.run(main)
    else:
        asyncio.run(main)


async def serve(app: web.Application, port: int) -> None:
    runner = web.AppRunner(app, access_log=None, handle_signals=True)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
