"""The start-up heap is frozen before the proxy serves (proxy/shell/heap.py), in a single
process and in every worker, so the collector's full passes skip it."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestServer

from proxy.cli import serving_app
from proxy.settings import Settings, UpstreamSettings
from tests.support.processes import ROOT, RUNNING, SERVING, Workers

FROZEN = r"\[worker (\d+)\] start-up heap frozen: (\d+) objects"


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # the test process's heap goes back to the collector


@pytest.mark.usefixtures("unfrozen")
async def test_the_single_process_app_freezes_its_heap_once_started(aiohttp_client: Any):
    settings = Settings(upstreams=[UpstreamSettings(name="u", url="http://127.0.0.1:9")])
    app = serving_app(settings)
    assert gc.get_freeze_count() == 0
    client = await aiohttp_client(TestServer(app))
    assert gc.get_freeze_count() > 10_000  # modules, settings, the app: not a handful
    assert (await client.get("/-/health")).status == 200


async def test_every_worker_freezes_its_heap_before_serving(tmp_path: Path):
    config = tmp_path / "proxy.toml"
    config.write_text('[[upstreams]]\nname = "u"\nurl = "http://127.0.0.1:9"\n')
    log = tmp_path / "proxy.log"
    with log.open("wb") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "proxy", "--config", str(config), "--workers", "2",
            "--port", "0", "--log-level", "debug",
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stderr=out,
        )  # fmt: skip
    proxy = Workers(process, log)
    try:
        await proxy.wait_for(RUNNING.pattern)
        found = await proxy.wait_for(FROZEN, 2)
        assert sorted(int(worker) for worker, _ in found) == [1, 2]
        assert all(int(objects) > 10_000 for _, objects in found)
        await proxy.wait_for(SERVING, 2)
        text = proxy.text()
        for worker in ("1", "2"):
            frozen = text.index(f"[worker {worker}] start-up heap frozen")
            assert frozen < text.index(f"[worker {worker}] serving")
    finally:
        process.terminate()
        assert await proxy.exit_status() == 0
