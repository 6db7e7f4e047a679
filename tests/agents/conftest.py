"""Agent sessions run in a network namespace that has only loopback (``unshare -n``, as root),
so nothing an agent tries can leave the machine; the upstream and the proxy start inside it."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
SESSION_TIMEOUT = 240

Session = dict[str, Any]


def run_session(agent: str, shape: str, via: str) -> Session:
    inner = (
        f"ip link set lo up && exec {sys.executable} -m tests.agents.session {agent} {shape} {via}"
    )
    done = subprocess.run(
        ["unshare", "--net", "--", "sh", "-c", inner],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=SESSION_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, (
        f"the agent session could not run (it needs root for unshare --net):\n{done.stderr}"
    )
    session: Session = json.loads(done.stdout)
    return session


@pytest.fixture
def sessions() -> Callable[..., list[Session]]:
    """Run several sessions at once: (agent, shape, via) each."""

    def run(*specs: tuple[str, str, str]) -> list[Session]:
        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            return list(pool.map(lambda spec: run_session(*spec), specs))

    return run
