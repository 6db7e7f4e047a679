"""Signals and the listening port, on the real CLI (``python -m proxy``), single process and
``--workers 2`` (issue 26 items 6, 15 and 17's port):

* SIGTERM: a stream still open when ``timeouts.shutdown_grace`` is over is cut then (within a
  second), not at twice the grace; its access line says ``end: "shutdown"``.
* SIGHUP (issue 28 item 3): the configuration reloaded; open streams finish on the old one,
  new requests get the new one, the counters go on; an invalid file changes nothing.
* A port already in use: one line naming it on stderr, exit status 2.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from tests.conftest import StartUpstream, upstream_url
from tests.support.processes import Workers
from tests.support.streams import read_until_error
from tests.support.upstreams import FIRST, REST, HeldStream, replay_app

ROOT = Path(__file__).parents[2]
CHAT = "/v1/chat/completions"
RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+) ")


class Proxy(Workers):
    """``python -m proxy --port 0``; its stderr in a file, its temporary files under ``tmp``."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path, tmp: Path) -> None:
        super().__init__(process, log)
        self.tmp = tmp

    def access(self) -> list[dict[str, Any]]:
        lines = [line for line in self.text().splitlines() if line.startswith("{")]
        return [entry for entry in map(orjson.loads, lines) if "request_id" in entry]

    def signal(self, signum: int) -> None:
        self.process.send_signal(signum)

    async def exit_status(self) -> int:
        async with asyncio.timeout(60):
            return await self.process.wait()


@pytest.fixture
async def run_proxy(tmp_path: Path) -> AsyncIterator[Any]:
    started: list[Proxy] = []

    async def run(upstream: str, *, workers: int = 1, grace: float = 20, port: int = 0) -> Proxy:
        config = tmp_path / "proxy.toml"
        config.write_text(
            f'[timeouts]\nshutdown_grace = {grace}\n[[upstreams]]\nname = "u"\nurl = "{upstream}"\n'
        )
        log = tmp_path / f"proxy-{len(started)}.log"
        tmp = tmp_path / f"tmp-{len(started)}"
        tmp.mkdir()
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "proxy", "--config", str(config),
                "--workers", str(workers), "--port", str(port),
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
                stderr=out,
            )  # fmt: skip
        proxy = Proxy(process, log, tmp)
        started.append(proxy)
        if port == 0:
            [bound] = await proxy.wait_for(RUNNING.pattern)
            proxy.port = int(bound)
            if workers > 1:
                await proxy.wait_for(r"\[worker \d+\] serving", workers)
        return proxy

    yield run
    for proxy in started:
        if proxy.process.returncode is None:
            proxy.process.kill()
            await proxy.process.wait()


async def open_streams(session: aiohttp.ClientSession, url: str, count: int) -> list[Any]:
    streams = []
    for _ in range(count):  # one after another, so that each worker gets some
        resp = await session.post(url + CHAT, json={"model": "m", "stream": True})
        assert await resp.content.readuntil(b"\n\n") == FIRST
        streams.append(resp)
    return streams


@pytest.mark.parametrize("workers", [1, 2])
async def test_streams_open_past_the_grace_period_are_cut_when_it_ends(
    workers: int, run_proxy: Any, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    grace = 3.0
    proxy = await run_proxy(
        upstream_url(await start_upstream(held.app())), workers=workers, grace=grace
    )
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        streams = await open_streams(session, proxy.url, 4)
        signalled = time.monotonic()
        proxy.signal(signal.SIGTERM)
        cut_at = []
        for resp in streams:
            received, error = await asyncio.wait_for(read_until_error(resp), timeout=30)
            cut_at.append(time.monotonic() - signalled)
            assert error is not None, "a cut stream must not look complete"
            assert received == b""
    assert await proxy.exit_status() == 0
    # aiohttp alone cut them at twice the grace (6 s): now within a second of it
    assert grace - 0.1 <= min(cut_at) <= max(cut_at) < grace + 1, cut_at
    entries = proxy.access()
    assert [e["end"] for e in entries] == ["shutdown"] * len(streams)
    assert {e["status"] for e in entries} == {200}


OTHER = b'data: {"other": 1}\n\ndata: [DONE]\n\n'


def _config(proxy: Proxy, text: str) -> None:
    """The proxy's config file, rewritten (what an operator does before ``kill -HUP``), with
    the grace it started with."""
    (proxy.tmp.parent / "proxy.toml").write_text(text + "[timeouts]\nshutdown_grace = 20\n")


async def _metrics(session: aiohttp.ClientSession, url: str) -> dict[tuple[str, str], float]:
    """(name, labels as text) -> value, from one scrape."""
    async with session.get(url + "/-/metrics") as resp:
        text = await resp.text()
    found = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name_labels, _, number = line.rpartition(" ")
            name, _, labels = name_labels.partition("{")
            found[(name, labels.rstrip("}"))] = float(number)
    return found


def _requests(metrics: dict[tuple[str, str], float]) -> float:
    return sum(v for (name, _), v in metrics.items() if name == "toolcall_proxy_requests_total")


# issue 28 item 3: SIGHUP reloads the configuration (it was ignored, with one line, before)
@pytest.mark.parametrize("workers", [1, 2])
async def test_sighup_reloads_without_cutting_a_stream(
    workers: int, run_proxy: Any, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    first = upstream_url(await start_upstream(held.app()))
    other = upstream_url(await start_upstream(replay_app(OTHER)))
    proxy = await run_proxy(first, workers=workers)
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        streams = await open_streams(session, proxy.url, 8)
        before = await _metrics(session, proxy.url)
        # the one upstream now at the other address; a listening address that needs a restart
        _config(proxy, f'host = "127.0.0.2"\n[[upstreams]]\nname = "u"\nurl = "{other}"\n')
        proxy.signal(signal.SIGHUP)
        done = "reload: configuration applied" if workers == 1 else "workers serve the new"
        await proxy.wait_for(done)
        assert "reload: host changed; ignored until the proxy restarts" in proxy.text()
        # new requests: the new configuration at once (the old one would hold it)
        async with (
            asyncio.timeout(10),
            session.post(proxy.url + CHAT, json={"model": "m", "stream": True}) as resp,
        ):
            assert await resp.read() == OTHER
        # the streams in flight: the old one, to their end, not a byte lost (their first
        # event was read before the reload)
        held.release.set()
        for resp in streams:
            assert await read_until_error(resp) == (REST, None)
        if workers > 1:
            await proxy.wait_for("worker \\d of the previous configuration exited with status 0", 2)
        after = await _metrics(session, proxy.url)
    assert proxy.process.returncode is None
    # the counters went on from where they were: the old workers' counts kept
    assert _requests(after) == _requests(before) + len(streams) + 1
    assert after[("toolcall_proxy_config_reloads_total", 'result="applied"')] == 1
    [old] = [k for (n, k) in before if n == "toolcall_proxy_config_info"]
    [new] = [k for (n, k) in after if n == "toolcall_proxy_config_info"]
    assert old != new
    assert after[("toolcall_proxy_config_info", new)] == workers
    entries = proxy.access()
    assert [e["end"] for e in entries] == ["complete"] * (len(streams) + 1)
    proxy.signal(signal.SIGTERM)
    assert await proxy.exit_status() == 0
    assert list(proxy.tmp.iterdir()) == []  # the supervisor removed its runtime folder


@pytest.mark.parametrize("workers", [1, 2])
async def test_an_invalid_reload_changes_nothing_and_says_which_key(
    workers: int, run_proxy: Any, start_upstream: StartUpstream
) -> None:
    held = HeldStream()
    held.release.set()
    proxy = await run_proxy(upstream_url(await start_upstream(held.app())), workers=workers)
    started = proxy.text().count("started (pid")
    _config(proxy, '[[upstreams]]\nname = "u"\nurl = "localhost:8080"\n')
    proxy.signal(signal.SIGHUP)
    [line] = await proxy.wait_for(r"reload: config error: .*")
    assert "upstreams[0].url: must be an http(s) URL with a host" in line
    assert line.endswith("keeping the running configuration")
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        async with session.post(proxy.url + CHAT, json={"model": "m", "stream": True}) as resp:
            assert await resp.read() == FIRST + REST  # the running configuration's upstream
        metrics = await _metrics(session, proxy.url)
    assert metrics[("toolcall_proxy_config_reloads_total", 'result="invalid"')] == 1
    assert ("toolcall_proxy_config_reloads_total", 'result="applied"') not in metrics
    assert proxy.text().count("started (pid") == started  # no worker replaced
    assert proxy.text().count("reload: config error") == 1
    proxy.signal(signal.SIGTERM)
    assert await proxy.exit_status() == 0


@pytest.mark.parametrize("workers", [1, 2])
async def test_inbound_keys_rotate_on_reload(
    workers: int, run_proxy: Any, start_upstream: StartUpstream, tmp_path: Path
) -> None:
    held = HeldStream()
    held.release.set()
    url = upstream_url(await start_upstream(held.app()))
    proxy = await run_proxy(url, workers=workers)
    keys = tmp_path / "keys"
    keys.write_text("old-key\n")
    config = f'[auth]\napi_keys_file = "{keys}"\n[[upstreams]]\nname = "u"\nurl = "{url}"\n'
    _config(proxy, config)
    proxy.signal(signal.SIGHUP)  # authentication turned on
    await proxy.wait_for("reload: configuration applied|workers serve the new")
    keys.write_text("new-key\n")
    proxy.signal(signal.SIGHUP)  # the same file, read again
    await proxy.wait_for("reload: configuration applied|workers serve the new", 2)
    if workers > 1:
        await proxy.wait_for("of the previous configuration exited", 4)
    connector = aiohttp.TCPConnector(force_close=True, limit=0)
    async with aiohttp.ClientSession(connector=connector) as session:
        for key, status in (("old-key", 401), ("new-key", 200)):
            headers = {"Authorization": f"Bearer {key}"}
            body = {"model": "m", "stream": True}
            async with session.post(proxy.url + CHAT, json=body, headers=headers) as resp:
                assert resp.status == status
                await resp.read()
    proxy.signal(signal.SIGTERM)
    assert await proxy.exit_status() == 0


@pytest.mark.parametrize("workers", [1, 2])
async def test_a_port_in_use_is_one_line_and_exit_status_2(workers: int, run_proxy: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proxy = await run_proxy("http://127.0.0.1:9", workers=workers, port=port)
        assert await proxy.exit_status() == 2
    lines = proxy.text().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("toolcall-proxy: config error: host, port: cannot listen on")
    assert f"127.0.0.1:{port}" in lines[0]
    assert "in use" in lines[0]
