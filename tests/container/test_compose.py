"""deploy/'s compose files: each one read by podman-compose, and the llama.cpp topology brought
up with its model server replaced by the stand-in (docker-compose.standin.yml) and torn down.

A test-only override on top names this session's images and publishes the proxy on a free
loopback port; the project name is unique, so nothing is shared with another run.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml

from tests.container.conftest import DEPLOY, MEASURED, Image
from tests.container.podman import LOOPBACK, Result, podman_compose_command, run, run_async, unique
from tests.container.recorded import (
    CANONICAL_BODY,
    RECORDING,
    calls_through_openai,
    expected_calls,
    raw_body,
)
from tests.support.sockets import free_port

LLAMA = DEPLOY / "docker-compose.yml"
VLLM = DEPLOY / "docker-compose.vllm.yml"
STANDIN = DEPLOY / "docker-compose.standin.yml"
COMPOSE_TIMEOUT = 300.0
READY_TIMEOUT = 60.0
PROJECT_LABEL = "io.podman.compose.project"


def compose_config(*files: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    args = [*podman_compose_command(), *[a for f in files for a in ("-f", str(f))], "config"]
    extra = [f"{k}={v}" for k, v in (env or {}).items()]
    result = run(["env", *extra, *args], within=120)
    loaded: dict[str, Any] = yaml.safe_load(result.stdout)
    return loaded


def test_compose_config_reads_the_llama_cpp_topology() -> None:
    services = compose_config(LLAMA)["services"]
    assert set(services) == {"llama", "proxy"}
    assert services["proxy"]["ports"] == ["8090:8090"]


def test_compose_config_reads_the_vllm_topology_with_its_key_and_only_with_it() -> None:
    services = compose_config(VLLM, env={"VLLM_API_KEY": "k"})["services"]
    assert set(services) == {"vllm", "proxy"}
    assert services["vllm"]["environment"]["VLLM_API_KEY"] == "k"
    assert services["proxy"]["environment"]["VLLM_API_KEY"] == "k"
    without = run(
        ["env", "-u", "VLLM_API_KEY", *podman_compose_command(), "-f", str(VLLM), "config"],
        within=120,
        check=False,
    )
    assert without.returncode != 0
    assert "set VLLM_API_KEY" in without.stderr


def test_compose_config_reads_the_standin_override_replacing_only_the_model_server() -> None:
    plain = compose_config(LLAMA)["services"]
    services = compose_config(LLAMA, STANDIN)["services"]
    assert services["proxy"] == plain["proxy"]
    llama = services["llama"]
    assert llama["image"].startswith("toolcall-proxy-standin:")
    assert llama["volumes"] == ["../tests/fixtures/upstream:/recordings:ro"]
    assert llama["healthcheck"]["test"][:2] == ["CMD", "python"]
    assert llama["expose"] == plain["llama"]["expose"] == ["8080"]
    port = llama["command"][llama["command"].index("--port") + 1]
    assert [port] == llama["expose"]


def test_every_shipped_compose_file_is_read_above() -> None:
    assert sorted(DEPLOY.glob("docker-compose*.yml")) == sorted([LLAMA, VLLM, STANDIN])


async def ready(url: str) -> tuple[int, dict[str, Any]]:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session,
        session.get(f"{url}/-/ready") as response,
    ):
        return response.status, json.loads(await response.read())


async def wait_for_ready(url: str, want: int) -> dict[str, Any]:
    deadline = time.monotonic() + READY_TIMEOUT
    while True:
        try:
            status, body = await ready(url)
        except aiohttp.ClientError as exc:  # published, but the proxy is not listening yet
            status, body = 0, {"error": repr(exc)}
        if status == want:
            return body
        if time.monotonic() > deadline:
            pytest.fail(f"/-/ready never answered {want}; last: {status} {body}", pytrace=False)
        await asyncio.sleep(0.25)


def leftovers(project: str) -> list[str]:
    found = []
    for kind in ("container", "pod", "network"):
        listed = run(
            ["podman", kind, "ls", *(["--all"] if kind == "container" else []),
             "--format", "{{.Names}}" if kind == "container" else "{{.Name}}"],
            within=60,
        )  # fmt: skip
        found += [f"{kind} {name}" for name in listed.stdout.split() if project in name]
    labelled = run(
        ["podman", "ps", "--all", "--filter", f"label={PROJECT_LABEL}={project}", "-q"], within=60
    )
    return found + [f"container {c}" for c in labelled.stdout.split()]


async def test_compose_sidecar_with_the_standin_repairs_and_follows_its_readiness(
    proxy_image: Image, standin_image: Image, tmp_path: Path
) -> None:
    project, port = unique("toolcall-proxy-compose"), free_port()
    images = tmp_path / "images.yml"
    images.write_text(
        yaml.safe_dump(
            {
                "services": {
                    "llama": {"image": standin_image.tag},
                    "proxy": {"image": proxy_image.tag, "ports": [f"{LOOPBACK}:{port}:8090"]},
                }
            }
        ).replace("ports:", "ports: !override")
    )
    compose = [*podman_compose_command(), "--project-name", project,
               "-f", str(LLAMA), "-f", str(STANDIN), "-f", str(images)]  # fmt: skip
    url = f"http://{LOOPBACK}:{port}"

    async def up(*services: str) -> Result:
        return await run_async(
            [*compose, "up", "--detach", "--no-build", *services], within=COMPOSE_TIMEOUT
        )

    try:
        started = time.monotonic()
        # The proxy alone: it serves, and is not ready while its model server is away.
        await up("--no-deps", "proxy")
        body = await wait_for_ready(url, 503)
        assert body["upstreams"]["llama"]["ok"] is False
        await up("llama")
        body = await wait_for_ready(url, 200)
        assert body["upstreams"]["llama"]["ok"] is True
        MEASURED["compose up to ready"] = f"{time.monotonic() - started:.1f} s"

        calls, finish = await calls_through_openai(f"{url}/v1", RECORDING)
        assert calls == expected_calls()
        assert finish == "tool_calls"
        assert await raw_body(f"{url}/v1", RECORDING) == CANONICAL_BODY
    finally:
        down = await run_async(
            [*compose, "down", "--timeout", "30"], within=COMPOSE_TIMEOUT, check=False
        )
    assert down.returncode == 0, down
    assert leftovers(project) == []
