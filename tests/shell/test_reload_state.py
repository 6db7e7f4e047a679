"""What a reload carries over from the running state (proxy/shell/hangup.py ``rebuilt``): an
upstream whose replicas and their rules are unchanged keeps its pool, so the health it learnt
and the requests in flight that ``max_concurrent_requests`` counts survive the reload; any
change to them starts the pool afresh."""

from __future__ import annotations

from typing import Any, cast

from aiohttp import ClientSession

from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import build_routes
from proxy.shell.app_state import ProxyState
from proxy.shell.hangup import rebuilt

URLS = ["http://127.0.0.1:9001", "http://127.0.0.1:9002"]


def _settings(**upstream: Any) -> Settings:
    return Settings(upstreams=[UpstreamSettings(name="u", **{"urls": URLS, **upstream})])


def _running(settings: Settings) -> ProxyState:
    router, upstreams = build_routes(settings)
    return ProxyState(settings, router, upstreams, cast(ClientSession, None))


def test_unchanged_replicas_keep_their_pool_across_a_reload() -> None:
    running = _running(_settings(max_concurrent_requests=4))
    pool = running.upstream("u").replicas
    # another setting of the upstream changes; its replicas and their rules do not
    after = rebuilt(_settings(max_concurrent_requests=4, dedupe_calls=False), running)
    assert after.upstream("u").replicas is pool
    assert after.upstream("u").options.dedupe_calls is False


def test_a_change_to_the_replicas_or_their_rules_starts_a_new_pool() -> None:
    running = _running(_settings(max_concurrent_requests=4))
    pool = running.upstream("u").replicas
    for changed in (
        {"max_concurrent_requests": 8},
        {"urls": [*URLS, "http://127.0.0.1:9003"]},
        {"max_concurrent_requests": 4, "eject_seconds": 30},
    ):
        after = rebuilt(_settings(**changed), running)
        assert after.upstream("u").replicas is not pool, changed
