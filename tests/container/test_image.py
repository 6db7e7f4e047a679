"""deploy/Dockerfile's image, run for real: its entrypoint's tools, serving, user and shutdown.

Each container runs on the host's network in front of a real aiohttp upstream on 127.0.0.1
that replays a recorded stream, with its own port, and is removed whatever the test's outcome.
"""

from __future__ import annotations

import asyncio
import time
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from tests.conftest import StartUpstream, port_of
from tests.container.conftest import DEPLOY, MEASURED, Image
from tests.container.podman import LOOPBACK, remove_containers, run_async, unique
from tests.container.recorded import (
    CANONICAL_BODY,
    Hold,
    calls_through_openai,
    expected_calls,
    raw_body,
    recorded_upstream,
    upstream_events,
)
from tests.support.dockerfile import image_uid, instruction
from tests.support.sockets import free_port

CONFIG_PATH = "/etc/toolcall-proxy/proxy.toml"
SHIPPED_CONFIGS = sorted((DEPLOY / "config").glob("*.toml"))
START_TIMEOUT = 60.0
GRACE_SECONDS = 20.0


@dataclass(frozen=True, slots=True)
class Running:
    name: str
    port: int
    started_seconds: float

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"


async def get(url: str) -> tuple[int, bytes]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(url) as response,
    ):
        return response.status, await response.read()


async def exited(name: str) -> str | None:
    state = await run_async(
        ["podman", "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", name], within=60
    )
    status, code = state.stdout.split()
    return code if status == "exited" else None


async def logs(name: str) -> str:
    result = await run_async(["podman", "logs", name], within=60, check=False)
    return result.stdout + result.stderr


@asynccontextmanager
async def serving(image: Image, config: Path) -> AsyncIterator[Running]:
    """The image with its default command and ``config`` mounted, until /-/health answers."""
    name, port = unique("toolcall-proxy-test"), free_port()
    started = time.monotonic()
    try:
        await run_async(
            ["podman", "run", "--detach", "--name", name, "--network", "host",
             # The host's network: the image's 0.0.0.0 would listen on every host interface.
             "--env", f"TOOLCALL_PROXY_HOST={LOOPBACK}", "--env", f"TOOLCALL_PROXY_PORT={port}",
             "--volume", f"{config}:{CONFIG_PATH}:ro", image.tag],
            within=120,
        )  # fmt: skip
        running = Running(name, port, 0.0)
        while True:
            try:
                status, _ = await get(f"{running.url}/-/health")
            except aiohttp.ClientError:
                status = 0
            if status == 200:
                break
            if await exited(name) is not None or time.monotonic() - started > START_TIMEOUT:
                pytest.fail(f"the proxy did not come up:\n{await logs(name)}", pytrace=False)
            await asyncio.sleep(0.05)
        yield Running(name, port, time.monotonic() - started)
    finally:
        remove_containers(name)


def proxy_config(tmp_path: Path, upstream_port: int) -> Path:
    path = tmp_path / "proxy.toml"
    path.write_text(
        f"[timeouts]\nshutdown_grace = {GRACE_SECONDS}\n\n"
        f'[[upstreams]]\nname = "recorded"\nurl = "http://{LOOPBACK}:{upstream_port}"\n'
        'models = ["*"]\n'
    )
    return path


@pytest.mark.parametrize("config", SHIPPED_CONFIGS, ids=lambda p: p.name)
async def test_image_check_prints_the_routing_table_of_each_shipped_config(
    proxy_image: Image, config: Path
) -> None:
    upstreams = tomllib.loads(config.read_text())["upstreams"]
    keys = [f"{u['api_key_env']}=set-by-the-test" for u in upstreams if "api_key_env" in u]
    result = await run_async(
        ["podman", "run", "--rm", "--network", "host",
         *[arg for key in keys for arg in ("--env", key)],
         "--volume", f"{config}:{CONFIG_PATH}:ro", proxy_image.tag,
         "check", "--config", CONFIG_PATH],
        within=120,
    )  # fmt: skip
    assert f"config: {CONFIG_PATH}: valid" in result.stdout
    # The image's environment wins over the file: every interface, the exposed port.
    assert "listens on 0.0.0.0:8090" in result.stdout
    assert "Routing:" in result.stdout
    for upstream in upstreams:
        [row] = [line for line in result.stdout.splitlines() if f" {upstream['name']} " in line]
        assert upstream["url"] in row


async def test_image_check_fails_a_broken_config_with_status_2(
    proxy_image: Image, tmp_path: Path
) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("[[upstreams]]\nname = 'x'\nurl = 'not a url'\nmodelz = ['*']\n")
    result = await run_async(
        ["podman", "run", "--rm", "--network", "host", "--volume", f"{config}:{CONFIG_PATH}:ro",
         proxy_image.tag, "check", "--config", CONFIG_PATH],
        within=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result
    assert "config error" in result.stderr


async def test_image_repairs_a_recorded_stream_for_a_real_client_as_its_non_root_user(
    proxy_image: Image, start_upstream: StartUpstream, tmp_path: Path
) -> None:
    upstream = await start_upstream(recorded_upstream())
    async with serving(proxy_image, proxy_config(tmp_path, port_of(upstream))) as proxy:
        MEASURED["container start-up"] = f"{proxy.started_seconds:.2f} s to /-/health 200"
        assert await get(f"{proxy.url}/-/health") == (200, b'{"status": "ok"}')
        status, body = await get(f"{proxy.url}/-/ready")
        assert (status, b'"status": "ready"' in body) == (200, True), body

        calls, finish = await calls_through_openai(f"{proxy.url}/v1", "tiny")
        assert calls == expected_calls()
        assert finish == "tool_calls"
        assert await raw_body(f"{proxy.url}/v1", "tiny") == CANONICAL_BODY

        # The user the Dockerfile names, numeric, as Kubernetes' runAsNonRoot needs it.
        uid = await run_async(["podman", "exec", proxy.name, "id", "-u"], within=60)
        gid = await run_async(["podman", "exec", proxy.name, "id", "-g"], within=60)
        assert [uid.stdout.strip(), gid.stdout.strip()] == instruction("USER").split(":")
        top = await run_async(["podman", "top", proxy.name, "huser", "args"], within=60)
        [process] = [line for line in top.stdout.splitlines()[1:] if "toolcall-proxy" in line]
        assert process.split()[0] == str(image_uid()), top.stdout
        # The image's own HEALTHCHECK, run by podman inside the container.
        await run_async(["podman", "healthcheck", "run", proxy.name], within=60)


async def test_image_drains_an_open_stream_on_sigterm_and_exits_0(
    proxy_image: Image, start_upstream: StartUpstream, tmp_path: Path
) -> None:
    hold = Hold(len(upstream_events()) // 2, asyncio.Event(), asyncio.Event())
    upstream = await start_upstream(recorded_upstream(hold))
    async with serving(proxy_image, proxy_config(tmp_path, port_of(upstream))) as proxy:
        reading = asyncio.create_task(raw_body(f"{proxy.url}/v1", "tiny"))
        await asyncio.wait_for(hold.reached.wait(), 30)  # half the stream is on its way
        signalled = time.monotonic()
        await run_async(["podman", "kill", "--signal", "TERM", proxy.name], within=60)

        # Draining: the listener closes at once, the open stream goes on.
        while True:
            try:
                await get(f"{proxy.url}/-/health")
            except aiohttp.ClientConnectionError:
                break
            assert time.monotonic() - signalled < 10, "still accepting after SIGTERM"
            await asyncio.sleep(0.1)
        assert not reading.done()
        assert await exited(proxy.name) is None, "exited with a stream still open"

        hold.release.set()
        assert await asyncio.wait_for(reading, 30) == CANONICAL_BODY
        wait = await run_async(["podman", "wait", proxy.name], within=GRACE_SECONDS + 30)
        assert wait.stdout.strip() == "0", await logs(proxy.name)
        assert time.monotonic() - signalled < GRACE_SECONDS
