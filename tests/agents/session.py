"""One agent session, run as ``python -m tests.agents.session AGENT SHAPE VIA``: a broken chat
upstream (or, SHAPE = native:QUIRK, a broken Responses one), the real proxy in front of it
(VIA = proxy) or not (VIA = direct), and the agent pointed at it. Meant to run inside a network
namespace that has only loopback (see tests/agents/conftest.py); it prints one JSON object with
what happened."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.agents.agents import AGENTS
from tests.agents.upstream import NATIVE, AgentUpstream
from tests.clients.proxy_process import ProxyProcess

AGENT_TIMEOUT = 120


def run(agent: str, shape: str, via: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix=f"agent-{agent}-") as tmp, AgentUpstream(shape) as up:
        work = Path(tmp)
        proxy = None
        base = up.url
        if via == "proxy":
            config = f'[[upstreams]]\nname = "model"\nurl = "{up.url}"\n'
            if shape.startswith(NATIVE):  # the upstream's own Responses stream, repaired
                config += 'responses = "native"\n'
            proxy = ProxyProcess(work, up.url, config)
            proxy.start()
            base = proxy.url
        home = work / "home"
        repo = work / "repo"
        home.mkdir()
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        invocation = AGENTS[agent](base, home)
        try:
            done = subprocess.run(
                invocation.argv,
                cwd=repo,
                env=invocation.env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=AGENT_TIMEOUT,
                check=False,
            )
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, out, err = -1, str(exc.stdout or ""), f"timed out after {AGENT_TIMEOUT}s"
        finally:
            log = proxy.logged() if proxy is not None else ""
            if proxy is not None:
                proxy.stop()
        return {
            "returncode": rc,
            "stdout": out[-60000:],
            "stderr": err[-3000:],
            "requests": len(up.requests),
            "bodies": up.requests,
            "tool_results": up.tool_results(),
            "proxy_log": log,
        }


if __name__ == "__main__":
    print(json.dumps(run(*sys.argv[1:4])))
