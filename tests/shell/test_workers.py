"""``--workers N``: the real CLI as N processes on one port, in front of a loopback upstream.

What is asserted, each through what a user sees (sockets, the access log, ``/-/metrics``, exit
statuses): connections spread over every worker; ``/-/metrics`` counts the whole proxy
whichever worker answers; SIGTERM drains every worker and the supervisor exits 0; a worker
killed with SIGKILL is started again and serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from prometheus_client.parser import text_string_to_metric_families

from proxy.cli import main
from tests.conftest import StartUpstream, upstream_url
from tests.support.processes import (
    RUNNING,
    SERVING,
    STARTED,
    Workers,
    connection_refused,
)
from tests.support.streams import read_until_error
from tests.support.upstreams import FIRST, REST, HeldStream

ROOT = Path(__file__).parents[2]
CHAT = "/v1/chat/completions"
STREAM = b'data: {"n": 1}\n\ndata: [DONE]\n\n'


async def short_stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await asyncio.sleep(0.01)  # long enough that connections overlap and workers take turns
    await response.write(STREAM)
    return response


def short_stream_app() -> web.Application:
    app = web.Application()
    app.router.add_post(CHAT, short_stream)
    return app


@pytest.fixture
async def run_workers(tmp_path: Path) -> AsyncIterator[Any]:
    started: list[Workers] = []

    async def run(upstream: str, workers: int = 2, grace: float = 20) -> Workers:
        config = tmp_path / "proxy.toml"
        config.write_text(
            f'[timeouts]\nshutdown_grace = {grace}\n[[upstreams]]\nname = "u"\nurl = "{upstream}"\n'
        )
        log = tmp_path / f"proxy-{len(started)}.log"
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "proxy", "--config", str(config),
                "--workers", str(workers), "--port", "0",
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=out,
            )  # fmt: skip
        proxy = Workers(process, log)
        started.append(proxy)
        [port] = await proxy.wait_for(RUNNING.pattern)
        proxy.port = int(port)
        await proxy.wait_for(SERVING, workers)
        return proxy

    yield run
    for proxy in started:
        if proxy.process.returncode is None:
            proxy.process.kill()
            await proxy.process.wait()
        for pid in proxy.pids().values():  # a worker left behind would keep the port open
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def send_closed(url: str, count: int, parallel: int = 20) -> list[int]:
    """``count`` streamed requests, each on a new connection, ``parallel`` at once."""
    gate = asyncio.Semaphore(parallel)
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one() -> int:
            async with (
                gate,
                session.post(
                    url + CHAT,
                    json={"model": "m", "stream": True},
                    headers={"Connection": "close"},
                ) as resp,
            ):
                assert await resp.read() == STREAM
                return resp.status

        return await asyncio.gather(*(one() for _ in range(count)))


async def scrape(url: str) -> tuple[float, float | None]:
    """The proxy's request total and how many workers the answer merged, on a new connection."""
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
        session.get(url + "/-/metrics") as resp,
    ):
        text = await resp.text()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    requests = sum(
        s.value for s in families["toolcall_proxy_requests"].samples if s.name.endswith("_total")
    )
    scraped = families.get("toolcall_proxy_workers_scraped")
    return requests, scraped.samples[0].value if scraped is not None else None


async def wait_access_lines(proxy: Workers, count: int) -> list[dict[str, Any]]:
    async with asyncio.timeout(10):
        while len(entries := proxy.access()) < count:  # noqa: ASYNC110 (a log file)
            await asyncio.sleep(0.05)
    return entries


async def test_connections_spread_over_every_worker_and_metrics_count_them_all(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    proxy = await run_workers(upstream_url(await start_upstream(short_stream_app())))
    sent = 200
    assert await send_closed(proxy.url, sent) == [200] * sent
    entries = await wait_access_lines(proxy, sent)
    served = Counter(entry["worker"] for entry in entries)
    assert sorted(served) == [1, 2], served
    assert sum(served.values()) == sent
    # Each scrape is a new connection, so different workers answer them; every one of them
    # reports both workers' requests.
    for _ in range(8):
        assert await scrape(proxy.url) == (sent, 2)
    proxy.process.send_signal(signal.SIGTERM)
    assert await proxy.exit_status() == 0


async def test_the_workers_lines_are_whole_and_the_last_ones_written_at_sigterm(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    # issue 29 item 1: each worker holds its lines and writes them in whole-line writes to
    # the one stderr they share; long paths make many a write hold several lines
    proxy = await run_workers(upstream_url(await start_upstream(short_stream_app())))
    paths = [f"{CHAT}/{'p' * (i * 97 % 2500)}/{i}" for i in range(200)]
    gate = asyncio.Semaphore(40)
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(path: str) -> None:
            async with gate, session.post(proxy.url + path, json={"model": "m"}) as resp:
                await resp.read()

        await asyncio.gather(*(one(p) for p in paths))
    proxy.process.send_signal(signal.SIGTERM)  # at once: some lines are still held
    assert await proxy.exit_status() == 0
    lines = proxy.text().splitlines()
    entries = [orjson.loads(line) for line in lines if line.startswith("{")]
    assert sorted(e["path"] for e in entries) == sorted(paths)
    assert {e["worker"] for e in entries} == {1, 2}
    plain = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ ")
    others = [x for x in lines if not (x.startswith("{") or plain.match(x))]
    assert others == ["(Press CTRL+C to quit)"]  # the second line of aiohttp's "Running on"


async def test_sigterm_drains_every_worker_and_open_streams_finish_byte_exact(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    grace = 20.0
    proxy = await run_workers(upstream_url(await start_upstream(held.app())), grace=grace)
    workers = proxy.pids()
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        # One connection after another: a burst of connections at once may all go to the
        # worker that wakes first and accepts until none is left.
        streams = []
        for _ in range(16):
            body = {"model": "m", "stream": True}
            streams.append(await session.post(proxy.url + CHAT, json=body))
        for resp in streams:
            assert await resp.content.readuntil(b"\n\n") == FIRST
        signalled = time.monotonic()
        proxy.process.send_signal(signal.SIGTERM)
        async with asyncio.timeout(10):
            while not await connection_refused(proxy.port):  # noqa: ASYNC110 (a remote state)
                await asyncio.sleep(0.02)
        assert proxy.process.returncode is None  # still draining the open streams
        held.release.set()
        for resp in streams:
            assert await read_until_error(resp) == (REST, None)
    assert await proxy.exit_status() == 0
    assert time.monotonic() - signalled < grace
    for pid in workers.values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    served = Counter(entry["worker"] for entry in proxy.access())
    assert sorted(served) == [1, 2], f"both workers should have held streams: {served}"
    assert not [e for e in proxy.access() if e["end"] != "complete"]


async def test_a_worker_killed_outright_is_started_again_and_serves(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    proxy = await run_workers(upstream_url(await start_upstream(short_stream_app())))
    killed = proxy.pids()[1]
    os.kill(killed, signal.SIGKILL)
    await proxy.wait_for(r"worker 1 was killed by signal 9; starting it again")
    await proxy.wait_for(SERVING, 3)
    assert proxy.pids()[1] != killed
    before = len(proxy.access())
    sent = 100
    assert await send_closed(proxy.url, sent) == [200] * sent
    entries = (await wait_access_lines(proxy, before + sent))[before:]
    served = Counter(entry["worker"] for entry in entries)
    assert served[1] > 0, f"the restarted worker serves again: {served}"
    assert await scrape(proxy.url) == (sent, 2)  # the new worker 1 started from zero
    proxy.process.send_signal(signal.SIGTERM)
    assert await proxy.exit_status() == 0


async def test_a_worker_that_keeps_dying_is_started_again_later_each_time(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    proxy = await run_workers(upstream_url(await start_upstream(short_stream_app())))
    waits = []
    for deaths in (1, 2, 3):
        pid = proxy.pids()[2]
        os.kill(pid, signal.SIGKILL)
        killed = time.monotonic()
        [wait] = (
            await proxy.wait_for(
                r"worker 2 was killed by signal 9; starting it again in ([\d.]+) s", deaths
            )
        )[-1:]
        await proxy.wait_for(STARTED.pattern, 2 + deaths)
        waits.append((float(wait), time.monotonic() - killed))
    assert [announced for announced, _ in waits] == [0.5, 1.0, 2.0]
    assert all(took >= announced for announced, took in waits), waits
    assert await send_closed(proxy.url, 10) == [200] * 10


@pytest.mark.parametrize("value", ["0", "-1", '"two"'])
def test_an_unusable_workers_value_stops_the_start_naming_the_key(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "proxy.toml"
    config.write_text(f"workers = {value}\n")
    assert main(["--config", str(config)]) == 2
    assert re.search(r"config error: .*proxy\.toml: workers: ", capsys.readouterr().err)


async def test_workers_whose_supervisor_was_killed_outright_stop_serving(
    run_workers: Any, start_upstream: StartUpstream
) -> None:
    proxy = await run_workers(upstream_url(await start_upstream(short_stream_app())))
    workers = proxy.pids()
    proxy.process.kill()
    await proxy.process.wait()
    async with asyncio.timeout(10):
        while not await connection_refused(proxy.port):  # noqa: ASYNC110 (a remote state)
            await asyncio.sleep(0.05)
        while any(map(running, workers.values())):  # noqa: ASYNC110 (other processes)
            await asyncio.sleep(0.05)


def running(pid: int) -> bool:
    """Alive and not a zombie (an orphan is reaped by whatever adopted it, if anything)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
