"""Shared fixtures: real aiohttp upstreams on 127.0.0.1 and the real proxy in front of them."""

from __future__ import annotations

import logging
import os
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import BaseTestServer, TestClient, TestServer
from hypothesis import HealthCheck, settings
from openai import AsyncOpenAI

from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import create_app
from proxy.shell.limits import server_options

# The lanes: which tests a bare `pytest` leaves out, and `--lane` to take them in.
pytest_plugins = ("tests.lanes",)

settings.register_profile(
    "ci", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("deep", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

FIXTURES = Path(__file__).parent / "fixtures"
UPSTREAM_FIXTURES = FIXTURES / "upstream"


@pytest.fixture(autouse=True)
def logging_errors_fail(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A record that a handler could not write fails the test. Logging itself only prints the
    error to stderr and goes on (the record is lost), which a test would never notice."""
    errors: list[str] = []
    handle_error = logging.Handler.handleError

    def fail_later(self: logging.Handler, record: logging.LogRecord) -> None:
        # called inside the handler's except clause; raising here would hit the logging code
        errors.append(f"{record.name}: {traceback.format_exc()}")
        handle_error(self, record)

    monkeypatch.setattr(logging, "raiseExceptions", True)
    monkeypatch.setattr(logging.Handler, "handleError", fail_later)
    yield
    if errors:
        pytest.fail("logging error(s):\n" + "\n".join(errors), pytrace=False)


StartUpstream = Callable[[web.Application], Awaitable[TestServer]]
StartProxy = Callable[..., Awaitable[TestClient[web.Request, web.Application]]]


@pytest.fixture
def start_upstream(aiohttp_server: Any) -> StartUpstream:
    """Start an aiohttp app on 127.0.0.1 as an upstream; returns its TestServer."""

    async def start(app: web.Application) -> TestServer:
        # TestServer cancels handlers when their client leaves, as the CLI's server does.
        server: TestServer = await aiohttp_server(app)
        return server

    return start


def template_probe(method: str, path: str, headers: Mapping[str, str]) -> bool:
    """The proxy's own ask for an upstream's chat template (``GET /props``, issue 23): it
    serves no client, so it carries no ``X-Request-Id``, which the proxy puts on every
    request it forwards. An upstream that records every request skips it (answering as a
    server without /props), so that it records only what clients sent."""
    return method == "GET" and path.endswith("/props") and "X-Request-Id" not in headers


def upstream_url(server: TestServer, prefix: str = "") -> str:
    return f"http://127.0.0.1:{server.port}{prefix}"


def port_of(server: BaseTestServer | TestClient[web.Request, web.Application]) -> int:
    """The port a started server listens on (aiohttp types it optional: None before start)."""
    assert server.port is not None, "the server has not started"
    return server.port


@pytest.fixture
def start_proxy(aiohttp_client: Any) -> StartProxy:
    """Start the real proxy app for the given upstreams (TestServers or settings)."""

    async def start(
        *upstreams: TestServer | UpstreamSettings, **settings_kwargs: Any
    ) -> TestClient[web.Request, web.Application]:
        configs = [
            u
            if isinstance(u, UpstreamSettings)
            else UpstreamSettings(name=f"up{i}", url=upstream_url(u))
            for i, u in enumerate(upstreams)
        ]
        proxy_settings = Settings(upstreams=configs, **settings_kwargs)
        server = TestServer(create_app(proxy_settings))
        # The runner's options, as the CLI passes them (TestServer() itself ignores kwargs).
        await server.start_server(**server_options(proxy_settings))
        client: TestClient[web.Request, web.Application] = await aiohttp_client(server)
        return client

    return start


OpenAIOf = Callable[[TestClient[web.Request, web.Application]], AsyncOpenAI]


@pytest.fixture
async def openai_of() -> AsyncIterator[OpenAIOf]:
    """openai-python's client of a proxy started by ``start_proxy`` (no retries), closed when
    the test ends."""
    made: list[AsyncOpenAI] = []

    def make(proxy: TestClient[web.Request, web.Application]) -> AsyncOpenAI:
        client = AsyncOpenAI(base_url=str(proxy.make_url("/v1")), api_key="sk-test", max_retries=0)
        made.append(client)
        return client

    yield make
    for client in made:
        await client.close()
