"""Record the corpus of real client requests (tests/live/corpus/): each agent of tests/agents
runs its one tool round trip through the proxy, and a tap between the agent and the proxy keeps
the requests exactly as the agent sent them (a Responses, Messages or chat body).

Run as root, inside a network namespace with only loopback, as the agent tests run:
``unshare --net -- sh -c 'ip link set lo up && .venv/bin/python -m tests.live.record_corpus'``.
It writes ``<agent>-first.json`` (the first request offering tools) and
``<agent>-tool-result.json`` (the request carrying the tool's output), and one
``sdk-<shape>.json`` for each SDK shape of tests/live/sdk_shapes.py. Regenerated only on
purpose, when an agent's pinned version changes."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from aiohttp import ClientSession, web

from tests.agents.agents import AGENTS
from tests.agents.upstream import AgentUpstream
from tests.clients.proxy_process import ProxyProcess
from tests.live.sdk_shapes import SHAPES

CORPUS = Path(__file__).resolve().parent / "corpus"
PATHS = {
    "codex": "/v1/responses",
    "claude-code": "/v1/messages",
    "opencode": "/v1/chat/completions",
}


class Tap:
    """A pass-through HTTP server on its own loop that keeps every request body it forwards."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.seen: list[tuple[str, Any]] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        app = web.Application(client_max_size=1 << 28)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        self.url = ""

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        if raw:
            self.seen.append((request.path, json.loads(raw)))
        headers = {
            k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")
        }
        async with (
            ClientSession() as session,
            session.request(
                request.method, self.target + request.path_qs, data=raw or None, headers=headers
            ) as upstream,
        ):
            response = web.StreamResponse(status=upstream.status)
            for key in ("Content-Type",):
                if key in upstream.headers:
                    response.headers[key] = upstream.headers[key]
            await response.prepare(request)
            try:
                async for piece in upstream.content.iter_any():
                    await response.write(piece)
                await response.write_eof()
            except ConnectionResetError:  # the client had what it wanted and closed
                pass
            return response

    def __enter__(self) -> Tap:
        self._thread.start()
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        asyncio.run_coroutine_threadsafe(self._runner.setup(), self._loop).result(30)
        site = web.SockSite(self._runner, sock)
        asyncio.run_coroutine_threadsafe(site.start(), self._loop).result(30)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)


def has_tool_result(path: str, body: dict[str, Any]) -> bool:
    if path.endswith("/responses"):
        return any(i.get("type") == "function_call_output" for i in body.get("input") or [])
    for message in body.get("messages") or []:
        content = message.get("content")
        if message.get("role") == "tool":
            return True
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return True
    return False


def record(agent: str) -> None:
    with tempfile.TemporaryDirectory() as tmp, AgentUpstream("canonical") as up:
        work = Path(tmp)
        proxy = ProxyProcess(work, up.url, f'[[upstreams]]\nname = "model"\nurl = "{up.url}"\n')
        proxy.start()
        try:
            with Tap(proxy.url) as tap:
                home, repo = work / "home", work / "repo"
                home.mkdir()
                repo.mkdir()
                subprocess.run(["git", "init", "-q", str(repo)], check=True)
                invocation = AGENTS[agent](tap.url, home)
                subprocess.run(
                    invocation.argv,
                    cwd=repo,
                    env=invocation.env,
                    stdin=subprocess.DEVNULL,
                    capture_output=True,
                    timeout=180,
                    check=False,
                )
        finally:
            proxy.stop()
    bodies = [body for path, body in tap.seen if path == PATHS[agent] and body.get("tools")]
    first = next(body for body in bodies if not has_tool_result(PATHS[agent], body))
    second = next(body for body in bodies if has_tool_result(PATHS[agent], body))
    CORPUS.mkdir(exist_ok=True)
    for name, body in (("first", first), ("tool-result", second)):
        path = CORPUS / f"{agent}-{name}.json"
        path.write_text(json.dumps({"path": PATHS[agent], "body": body}, indent=1) + "\n")
        print(path, len(path.read_bytes()))


def record_sdk_shapes() -> None:
    with tempfile.TemporaryDirectory() as tmp, AgentUpstream("canonical") as up:
        proxy = ProxyProcess(
            Path(tmp), up.url, f'[[upstreams]]\nname = "model"\nurl = "{up.url}"\n'
        )
        proxy.start()
        try:
            for name, (path, send) in SHAPES.items():
                with Tap(proxy.url) as tap:
                    send(tap.url)
                [(seen_path, body)] = tap.seen
                assert seen_path == path, (name, seen_path)
                out = CORPUS / f"{name}.json"
                out.write_text(json.dumps({"path": path, "body": body}, indent=1) + "\n")
                print(out, len(out.read_bytes()))
        finally:
            proxy.stop()


if __name__ == "__main__":
    names = sys.argv[1:] or [*AGENTS, "sdk"]
    for name in names:
        if name == "sdk":
            record_sdk_shapes()
        else:
            record(name)
