"""Running podman and podman-compose for the container lane, with this lane's configuration.

Every call has a timeout and, when it fails, says what ran and what it printed. Names carry
the process id and a random part, so runs on one machine never share a container or an image.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent.parent
CONTAINERS_CONF = Path(__file__).with_name("containers.conf")
TOOLS_SCRIPT = ".ci/container-tools"
# The whole lane runs in front of the loopback, so the image's port is never published twice.
LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class Result:
    returncode: int
    stdout: str
    stderr: str


def environment() -> dict[str, str]:
    return {**os.environ, "CONTAINERS_CONF": str(CONTAINERS_CONF)}


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def podman_compose_command() -> list[str]:
    """podman-compose from the test extra, in the interpreter running the tests."""
    return [sys.executable, "-m", "podman_compose"]


def describe(args: Sequence[str], result: Result) -> str:
    return (
        f"`{' '.join(args)}` exited {result.returncode}\n"
        f"--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )


def run(
    args: Sequence[str], *, within: float, check: bool = True, cwd: Path = ROOT, stdin: bytes = b""
) -> Result:
    try:
        done = subprocess.run(
            list(args), input=stdin, capture_output=True, timeout=within, env=environment(),
            cwd=cwd, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"`{' '.join(args)}` took longer than {within} s: {exc}", pytrace=False)
    result = Result(done.returncode, done.stdout.decode(), done.stderr.decode())
    if check and result.returncode != 0:
        pytest.fail(describe(args, result), pytrace=False)
    return result


async def run_async(
    args: Sequence[str], *, within: float, check: bool = True, cwd: Path = ROOT
) -> Result:
    """As ``run``, without blocking the loop that serves the test's own upstream."""
    process = await asyncio.create_subprocess_exec(
        *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(), cwd=cwd,
        stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), within)
    except TimeoutError:
        process.kill()
        await process.wait()
        pytest.fail(f"`{' '.join(args)}` took longer than {within} s", pytrace=False)
    result = Result(process.returncode or 0, stdout.decode(), stderr.decode())
    if check and result.returncode != 0:
        pytest.fail(describe(args, result), pytrace=False)
    return result


def require_podman() -> None:
    """Fail, never skip, with what to do, when this machine cannot run containers."""
    missing = [tool for tool in ("podman", "runc", "debootstrap") if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"the container lane needs {', '.join(missing)}: run `bash {TOOLS_SCRIPT}` "
            "(.ci/check does), which installs them with apt",
            pytrace=False,
        )
    info = run(["podman", "info"], within=120, check=False)
    if info.returncode != 0:
        pytest.fail(
            "podman is installed but cannot run here; tests/container/containers.conf holds "
            f"the settings this lane needs.\n{describe(['podman', 'info'], info)}",
            pytrace=False,
        )


def remove_containers(*names: str) -> None:
    if names:
        run(["podman", "rm", "--force", "--time", "0", *names], within=120, check=False)


def remove_images(*tags: str) -> None:
    if tags:
        run(["podman", "rmi", "--force", *tags], within=120, check=False)
