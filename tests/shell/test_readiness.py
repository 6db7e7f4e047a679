"""Liveness (/-/health) and readiness (/-/ready): the upstreams are asked, briefly, and cached."""

from __future__ import annotations

import asyncio

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from proxy.settings import UpstreamSettings
from proxy.shell.app_state import STATE
from proxy.shell.readiness import Readiness
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.sockets import free_port
from tests.support.upstreams import models_app


async def test_health_is_ok_even_when_no_upstream_answers(start_proxy: StartProxy) -> None:
    proxy = await start_proxy(UpstreamSettings(name="gone", url=f"http://127.0.0.1:{free_port()}"))
    resp = await proxy.get("/-/health")
    assert (resp.status, await resp.json()) == (200, {"status": "ok"})


async def test_ready_when_every_upstream_answers(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    a = await start_upstream(models_app())
    b = await start_upstream(models_app())
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(a), models=["a*"]),
        UpstreamSettings(name="b", url=upstream_url(b), models=["b*"]),
    )
    resp = await proxy.get("/-/ready")
    assert resp.status == 200
    body = await resp.json()
    assert body["status"] == "ready"
    assert body["upstreams"] == {
        "a": {"ok": True, "detail": "status 200"},
        "b": {"ok": True, "detail": "status 200"},
    }


async def test_not_ready_names_the_upstreams_that_fail(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    loading = await start_upstream(models_app(503))
    fine = await start_upstream(models_app())
    proxy = await start_proxy(
        UpstreamSettings(name="loading", url=upstream_url(loading), models=["l*"]),
        UpstreamSettings(name="fine", url=upstream_url(fine), models=["f*"]),
        UpstreamSettings(name="gone", url=f"http://127.0.0.1:{free_port()}", models=["g*"]),
    )
    resp = await proxy.get("/-/ready")
    assert resp.status == 503
    body = await resp.json()
    assert body["status"] == "not ready"
    assert body["upstreams"]["loading"] == {"ok": False, "detail": "status 503"}
    assert body["upstreams"]["fine"]["ok"] is True
    assert body["upstreams"]["gone"]["ok"] is False
    assert body["upstreams"]["gone"]["detail"].startswith("unreachable")


async def test_checks_send_the_upstream_credentials_under_its_path_prefix(
    start_upstream: StartUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VLLM_KEY", "sk-vllm")
    seen: list[dict[str, str]] = []

    app = web.Application()
    app.add_subapp("/prefix", models_app(seen=seen))
    upstream = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(name="v", url=upstream_url(upstream, "/prefix"), api_key_env="VLLM_KEY")
    )
    assert (await proxy.get("/-/ready")).status == 200
    [headers] = seen
    assert headers["Authorization"] == "Bearer sk-vllm"


async def test_answers_are_cached_and_concurrent_probes_share_one_round(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    seen: list[dict[str, str]] = []
    upstream = await start_upstream(models_app(delay=0.1, seen=seen))
    proxy = await start_proxy(upstream)
    answers = await asyncio.gather(*(proxy.get("/-/ready") for _ in range(5)))
    assert [a.status for a in answers] == [200] * 5
    assert (await proxy.get("/-/ready")).status == 200
    assert len(seen) == 1


async def test_a_slow_upstream_times_out_and_the_cache_expires(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    seen: list[dict[str, str]] = []
    upstream: TestServer = await start_upstream(models_app(delay=1.0, seen=seen))
    proxy = await start_proxy(upstream)
    readiness = Readiness(timeout=0.1, cache_seconds=0.0)
    state = proxy.app[STATE].now
    first = await readiness.report(state)
    assert first["up0"].ok is False
    assert first["up0"].detail == "timed out after 0.1 s"
    await readiness.report(state)
    assert len(seen) == 2
