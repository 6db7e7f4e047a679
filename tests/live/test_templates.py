"""The recorded requests of Codex CLI, Claude Code, OpenCode and the SDKs against a real
llama-server under every chat template of its tree: through the proxy at its defaults every
one is accepted; sent as they were before the request repairs, the refusals show.

Rendering is all the acceptance needs, so the proxy's upstream is render_tap.py: each chat
request the proxy sends is rendered by the server's ``POST /apply-template`` (a 7-33k-token
prefill per request and template would cost the lane an hour). A sample of full requests, with
generation, is in test_full_requests.py. Image shapes are left to test_render.py: a text-only
server refuses an image before any template renders it.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import create_app
from tests.live.corpus import Recorded, Verdict, load, verdict
from tests.live.render_tap import RenderTap
from tests.live.server import Build, LlamaServer


def before_repairs(recorded: Recorded) -> dict[str, Any]:
    """The chat request the proxy sent before the request repairs: a chat client's as it came,
    another protocol's as translated (with the usage request the shell adds)."""
    if recorded.protocol == "completions":
        return recorded.body
    to_chat = CLIENT_PROTOCOLS[recorded.protocol].to_chat
    assert to_chat is not None
    chat = to_chat(recorded.body).body
    if chat.get("stream"):
        chat["stream_options"] = {"include_usage": True}
    return chat


async def render_directly(
    session: ClientSession, server: LlamaServer, chat: dict[str, Any]
) -> tuple[Verdict, str]:
    async with session.post(f"{server.url}/apply-template", json=chat) as resp:
        return verdict(resp.status, await resp.read())


async def through_proxy(
    tap: RenderTap, proxy: TestClient[Any, Any], recorded: Recorded
) -> tuple[Verdict, str, int]:
    """The server's verdict on what the proxy sent, and the status the client got."""
    count = len(tap.seen)
    resp = await proxy.post(recorded.path, json=recorded.body)
    await resp.read()
    assert len(tap.seen) == count + 1, (
        f"{recorded.name}: the proxy sent {len(tap.seen) - count} requests"
    )
    rendered = tap.seen[-1]
    found, detail = verdict(rendered.status, rendered.body)
    return found, detail, resp.status


async def test_every_template_accepts_the_corpus_through_the_proxy(
    llama_build: Build, tiny_model: Path, tmp_path: Path
):
    corpus = load(images=False)
    through: Counter[Verdict] = Counter()
    direct: Counter[Verdict] = Counter()
    refused_through: list[str] = []
    refused_direct: dict[str, list[str]] = {}
    async with ClientSession() as session:
        for template in llama_build.templates():
            log = tmp_path / f"{template.stem}.log"
            server = LlamaServer(llama_build, tiny_model, template, log)
            await asyncio.to_thread(server.__enter__)
            try:
                tap = RenderTap(server.url)
                upstream = TestServer(tap.app())
                await upstream.start_server()
                settings = Settings(
                    upstreams=[
                        UpstreamSettings(name="llama", url=f"http://127.0.0.1:{upstream.port}")
                    ]
                )
                proxy = TestClient(TestServer(create_app(settings)))
                await proxy.start_server()
                try:
                    ready = await proxy.get("/-/ready")  # a readiness round reads /props
                    assert ready.status == 200, await ready.text()
                    for recorded in corpus:
                        found, detail, status = await through_proxy(tap, proxy, recorded)
                        through[found] += 1
                        if found is Verdict.REFUSED:
                            refused_through.append(
                                f"{recorded.name} under {template.stem}: {detail}"
                            )
                        elif found is Verdict.ACCEPTED:
                            assert status == 200, f"{recorded.name} under {template.stem}: {status}"
                        seen, detail = await render_directly(
                            session, server, before_repairs(recorded)
                        )
                        direct[seen] += 1
                        if seen is Verdict.REFUSED:
                            refused_direct.setdefault(template.stem, []).append(
                                f"{recorded.name}: {detail[:160]}"
                            )
                finally:
                    await proxy.close()
                    await upstream.close()
            finally:
                server.__exit__()
    report = {
        "templates": len(llama_build.templates()),
        "requests": len(corpus),
        "through the proxy": {v.value: n for v, n in through.items()},
        "before the repairs": {v.value: n for v, n in direct.items()},
        "refused before": refused_direct,
    }
    print(json.dumps(report, indent=1))
    assert refused_through == [], "\n".join(refused_through)
    # the repairs matter: before them, these templates refused these agents' requests
    for stem, agent in [
        ("Qwen3.5-4B", "codex-first"),
        ("mistralai-Mistral-Nemo-Instruct-2407", "codex-first"),
        ("mistralai-Mistral-Nemo-Instruct-2407", "claude-code-tool-result"),
        ("Mistral-Small-3.2-24B-Instruct-2506", "opencode-tool-result"),
    ]:
        assert any(line.startswith(agent + ":") for line in refused_direct.get(stem, [])), (
            stem,
            agent,
            refused_direct,
        )
