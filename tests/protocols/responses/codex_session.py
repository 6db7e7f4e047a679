"""One Codex CLI session through the real proxy against a chat-only replay upstream, offline.

``python -m tests.protocols.responses.codex_session SHAPE WORKDIR`` starts the replay upstream
(tests/protocols/responses/shapes.py, streaming Codex's ``exec_command`` call in SHAPE) and the
proxy on loopback ports, runs ``codex exec`` with a custom provider (``wire_api =
"responses"``, base_url = the proxy) in a fresh home and git repository, and prints one JSON
object: the chat requests the upstream received, Codex's exit status and its JSON events.
test_codex.py runs it inside a network namespace with only loopback (``unshare -n``), so the
upstream, the proxy and Codex share a network that reaches nothing else.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import create_app
from tests.protocols.responses.native_replay import ResponsesReplay
from tests.protocols.responses.shapes import ChatReplay

CODEX = Path(__file__).resolve().parents[2] / "clients" / "node_modules" / ".bin" / "codex"
MARKER = "toolcall-proxy-$((6*7))"  # the shell prints toolcall-proxy-42: proof the command ran
PROMPT = "Run the shell command that prints the marker, then tell me what it printed."
TIMEOUT = 90.0
FEATURES_OFF = (
    "plugins",
    "remote_plugin",
    "plugin_sharing",
    "apps",
    "in_app_updates",
    "in_app_browser",
    "browser_use",
    "computer_use",
    "skill_mcp_dependency_install",
    "daemon_auto_start",
)


def codex_config(base_url: str) -> str:
    """research/protocols.md §5: no updates, analytics, plugins or anything that leaves 127.0.0.1."""
    features = "\n".join(f"{name} = false" for name in FEATURES_OFF)
    return f"""model = "m"
model_provider = "p"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.p]
name = "proxy"
base_url = "{base_url}"
env_key = "TOOLCALL_PROXY_TEST_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
{features}
"""


async def _serve(app: web.Application) -> tuple[web.AppRunner, int]:
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, int(runner.addresses[0][1])


async def session(shape: str, workdir: Path) -> dict[str, Any]:
    """SHAPE is a chat shape (shapes.SHAPES: translate mode) or ``native:<quirk>``
    (native_replay.QUIRKS: the upstream's own broken Responses stream, native mode)."""
    arguments = {"exec_command": {"cmd": f"echo {MARKER}"}}
    mode: dict[str, Any] = {}
    replay: ChatReplay | ResponsesReplay
    if shape.startswith("native:"):
        replay = ResponsesReplay(shape.removeprefix("native:"), arguments, call_id="call_codex1")
        mode = {"responses": "native"}
    else:
        replay = ChatReplay(shape, arguments, call_id="call_codex1")
    upstream, upstream_port = await _serve(replay.app)
    url = f"http://127.0.0.1:{upstream_port}"
    settings = Settings(upstreams=[UpstreamSettings(name="up", url=url, **mode)])
    proxy, proxy_port = await _serve(create_app(settings))
    home, repo = workdir / "home", workdir / "repo"
    (home / ".codex" / "config.toml").write_text(codex_config(f"http://127.0.0.1:{proxy_port}/v1"))
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(home / ".codex"),
        "TOOLCALL_PROXY_TEST_KEY": "sk-test",
        "NO_COLOR": "1",
    }
    process = await asyncio.create_subprocess_exec(
        str(CODEX),
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        PROMPT,
        cwd=repo,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), TIMEOUT)
    except TimeoutError:
        process.kill()
        stdout, stderr = await process.communicate()
    await proxy.cleanup()
    await upstream.cleanup()
    events = []
    for line in stdout.decode(errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            events.append({"unparsed": line})
    return {
        "returncode": process.returncode,
        "requests": replay.requests,
        "events": events,
        "stderr": stderr.decode(errors="replace")[-4000:],
    }


def prepare(workdir: Path) -> None:
    """A fresh home for Codex and a git repository as its working directory."""
    (workdir / "home" / ".codex").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(workdir / "repo")], check=True)


def main() -> None:
    shape, workdir = sys.argv[1], Path(sys.argv[2])
    prepare(workdir)
    print(json.dumps(asyncio.run(session(shape, workdir))))


if __name__ == "__main__":
    main()
