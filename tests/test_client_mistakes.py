"""A client's mistake is a 4xx in its protocol's shape, never a 500 or a traceback (issue 26,
items 3, 5, 10, 14 and 17's request side), through the real proxy app in front of a real
loopback upstream (tests/request_upstream.py) that answers whatever reaches it.

Each test sends what a careless or hostile client would and checks the status, the shape of
the error (OpenAI's on chat, Responses' on /v1/responses, Anthropic's on /v1/messages), the
field it names, that nothing reached the upstream when the proxy refused, and that nothing was
logged with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.request_upstream import AnyUpstream

Proxy = TestClient[web.Request, web.Application]
Start = Callable[..., Awaitable[tuple[AnyUpstream, Proxy]]]


@pytest.fixture
def proxy_to(start_upstream: StartUpstream, start_proxy: StartProxy) -> Start:
    """The proxy in front of one AnyUpstream, ``upstream`` its per-upstream settings."""

    async def start(
        upstream: dict[str, Any] | None = None, **settings: Any
    ) -> tuple[AnyUpstream, Proxy]:
        recorder = AnyUpstream()
        url = upstream_url(await start_upstream(recorder.app))
        config = UpstreamSettings(name="u", url=url, **(upstream or {}))
        return recorder, await start_proxy(config, **settings)

    return start


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not logged, [r.getMessage() for r in logged]


def error_of(protocol: str, body: bytes) -> str:
    """The message of an error body, checking it has the protocol's shape."""
    error = orjson.loads(body)
    if protocol == "messages":
        assert error["type"] == "error", error
        assert set(error["error"]) == {"type", "message"}
        return str(error["error"]["message"])
    assert set(error) == {"error"}, error
    assert isinstance(error["error"]["type"], str)
    return str(error["error"]["message"])


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


# -- item 5: the proxy's own prefix ----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/-/health/"),
        ("GET", "/-/nothing"),
        ("POST", "/-/metrics"),
        ("GET", "/-/"),
        ("POST", "/-/x/v1/messages"),
    ],
)
async def test_a_path_under_the_own_prefix_that_is_no_endpoint_is_404(
    method: str, path: str, proxy_to: Start, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_to()
    resp = await proxy.request(method, path, data=b"{}")
    assert resp.status == 404
    protocol = "messages" if path.endswith("/messages") and method == "POST" else "chat"
    assert "/-/health" in error_of(protocol, await resp.read())
    assert upstream.requests == []
    no_tracebacks(caplog)


# -- item 3: anything else a handler raises ----------------------------------------------------


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
async def test_a_bug_in_the_proxy_is_a_500_in_the_protocols_shape_logged_once(
    protocol: str,
    proxy_to: Start,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bug cannot be sent by a client once the mistakes are 400s: one is put in the handler.
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("proxy.shell.handlers.plan_request", broken)
    upstream, proxy = await proxy_to()
    resp = await proxy.post(
        PATHS[protocol], json={"model": "m"}, headers={"X-Request-Id": "req-bug-1"}
    )
    assert resp.status == 500
    assert resp.headers["Content-Type"] == "application/json"
    assert "req-bug-1" in error_of(protocol, await resp.read())
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert "req-bug-1" in failures[0].getMessage()
    assert upstream.requests == []
