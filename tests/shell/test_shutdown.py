"""Graceful shutdown of the real CLI (``python -m proxy``) on SIGTERM.

Documented outcome: the listening socket closes at once (new connections are refused), open
responses may finish for up to ``timeouts.shutdown_grace`` seconds, the rest are then cut
(their clients see a truncated stream), and the process exits with status 0.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import StartUpstream, upstream_url
from tests.support.processes import connection_refused
from tests.support.sockets import free_port
from tests.support.streams import read_until_error
from tests.support.upstreams import FIRST, REST, HeldStream

ROOT = Path(__file__).parents[2]


class ProxyProcess:
    def __init__(self, process: asyncio.subprocess.Process, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    async def wait_ready(self) -> None:
        async with aiohttp.ClientSession() as session, asyncio.timeout(30):
            while True:
                try:
                    async with session.get(self.url + "/-/health") as resp:
                        if resp.status == 200:
                            return
                except aiohttp.ClientConnectionError:
                    await asyncio.sleep(0.05)

    def terminate(self) -> None:
        self.process.send_signal(signal.SIGTERM)

    async def exit_status(self) -> int:
        async with asyncio.timeout(30):
            return await self.process.wait()


@pytest.fixture
async def run_proxy(tmp_path: Path) -> AsyncIterator[object]:
    started: list[ProxyProcess] = []

    async def run(upstream: str, grace: float) -> ProxyProcess:
        port = free_port()
        config = tmp_path / "proxy.toml"
        config.write_text(
            f'port = {port}\nlog_level = "warning"\n[timeouts]\nshutdown_grace = {grace}\n'
            f'[[upstreams]]\nname = "u"\nurl = "{upstream}"\n'
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "proxy",
            "--config",
            str(config),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        proxy = ProxyProcess(process, port)
        started.append(proxy)
        await proxy.wait_ready()
        return proxy

    yield run
    for proxy in started:
        if proxy.process.returncode is None:
            proxy.process.kill()
            await proxy.process.wait()


async def test_sigterm_with_nothing_open_exits_zero(
    run_proxy: object, start_upstream: StartUpstream
) -> None:
    upstream = await start_upstream(HeldStream().app())
    proxy = await run_proxy(upstream_url(upstream), 20)  # type: ignore[operator]
    proxy.terminate()
    assert await proxy.exit_status() == 0


async def test_sigterm_refuses_new_connections_and_lets_an_open_stream_finish(
    run_proxy: object, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    proxy = await run_proxy(upstream_url(await start_upstream(held.app())), 20)  # type: ignore[operator]
    async with aiohttp.ClientSession() as session:
        resp = await session.post(
            proxy.url + "/v1/chat/completions", json={"model": "m", "stream": True}
        )
        assert await resp.content.readuntil(b"\n\n") == FIRST
        proxy.terminate()
        async with asyncio.timeout(10):
            while not await connection_refused(proxy.port):  # noqa: ASYNC110 (a remote state)
                await asyncio.sleep(0.02)
        assert proxy.process.returncode is None  # still serving the open stream
        held.release.set()
        received, error = await read_until_error(resp)
    assert error is None
    assert received == REST
    assert await proxy.exit_status() == 0


async def test_a_stream_still_open_after_the_grace_period_is_cut_and_the_exit_is_zero(
    run_proxy: object, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    proxy = await run_proxy(upstream_url(await start_upstream(held.app())), 1)  # type: ignore[operator]
    async with aiohttp.ClientSession() as session:
        resp = await session.post(
            proxy.url + "/v1/chat/completions", json={"model": "m", "stream": True}
        )
        assert await resp.content.readuntil(b"\n\n") == FIRST
        proxy.terminate()
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=20)
        resp.close()
    assert error is not None, "a cut stream must not look complete"
    assert received == b""
    await asyncio.wait_for(held.cancelled.wait(), timeout=10)
    assert await proxy.exit_status() == 0


async def test_an_idle_keep_alive_connection_is_closed_on_sigterm(
    run_proxy: object, start_upstream: StartUpstream
) -> None:
    upstream = await start_upstream(HeldStream().app())
    proxy = await run_proxy(upstream_url(upstream), 20)  # type: ignore[operator]
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(b"GET /-/health HTTP/1.1\r\nHost: x\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    await reader.readexactly(int(head.split(b"Content-Length: ")[1].split(b"\r\n")[0]))
    proxy.terminate()
    assert await asyncio.wait_for(reader.read(), timeout=10) == b""  # closed, nothing more
    writer.close()
    assert await proxy.exit_status() == 0
