"""A sample of the corpus as full requests (prompt processing and generation) through the
proxy to the real llama-server, under the templates whose refusals the repairs remove, and
the server's own Responses and Messages streams through native mode, judged by the strict
checkers. Generation is capped (the request's own limit, set where the client set none, and
the upstream's max_tokens_limit): the prompt is what is under test."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Final

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestClient, TestServer

from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import create_app
from tests.core.protocols.messages import checker as messages_checker
from tests.core.protocols.responses import checker as responses_checker
from tests.live.corpus import Recorded, Verdict, load, verdict
from tests.live.server import Build, LlamaServer

#: the templates the issue found refusing agents' requests, and Qwen2.5 (no refusal)
SAMPLE: Final = (
    "Qwen3.5-4B",
    "mistralai-Mistral-Nemo-Instruct-2407",
    "Mistral-Small-3.2-24B-Instruct-2506",
    "google-gemma-2-2b-it",
    "Qwen-Qwen2.5-7B-Instruct",
)
MAX_TOKENS: Final = 24


async def proxy_for(server: LlamaServer, **upstream: Any) -> TestClient[Any, Any]:
    settings = Settings(
        upstreams=[
            UpstreamSettings(name="llama", url=server.url, max_tokens_limit=MAX_TOKENS, **upstream)
        ]
    )
    client: TestClient[Any, Any] = TestClient(TestServer(create_app(settings)))
    await client.start_server()
    ready = await client.get("/-/ready")
    assert ready.status == 200, await ready.text()
    return client


def template(build: Build, name: str) -> Path:
    [found] = [t for t in build.templates() if t.stem == name]
    return found


LIMIT_KEY: Final = {
    "responses": "max_output_tokens",
    "messages": "max_tokens",
    "completions": "max_tokens",
}


async def send(proxy: TestClient[Any, Any], recorded: Recorded) -> tuple[int, bytes]:
    # a client that asks for no limit (Codex) would let the tiny model run to its context
    body = {**recorded.body, LIMIT_KEY[recorded.protocol]: MAX_TOKENS}
    resp = await proxy.post(recorded.path, json=body)
    return resp.status, await resp.read()


@pytest.mark.parametrize("name", SAMPLE)
async def test_full_requests_through_the_proxy_are_accepted(
    llama_build: Build, tiny_model: Path, tmp_path: Path, name: str
):
    server = LlamaServer(
        llama_build, tiny_model, template(llama_build, name), tmp_path / "server.log"
    )
    await asyncio.to_thread(server.__enter__)
    try:
        proxy = await proxy_for(server)
        try:
            refused = []
            for recorded in load(images=False):
                status, body = await send(proxy, recorded)
                found, detail = verdict(status, body)
                if found is Verdict.REFUSED:
                    refused.append(f"{recorded.name}: {status} {detail}")
            assert refused == [], "\n".join(refused)
        finally:
            await proxy.close()
    finally:
        server.__exit__()


@pytest.mark.parametrize("name", ["Qwen-Qwen2.5-7B-Instruct", "Qwen3.5-4B"])
async def test_the_servers_own_responses_and_messages_streams_come_out_canonical(
    llama_build: Build, tiny_model: Path, tmp_path: Path, name: str
):
    """Native mode in front of llama-server's /v1/responses and /v1/messages: Qwen2.5's
    template (the tiny model opens a call there when tools are offered), whose streams must
    pass the strict checkers, and Qwen3.5's, which refuses Codex's request sent to the server
    directly and takes it through the proxy. (Qwen3.5's native Responses stream carries
    ``response.reasoning_text.delta`` events the native repairer does not number yet: the
    native streams are issue 26's, so that template is judged here by acceptance only.)"""
    server = LlamaServer(
        llama_build, tiny_model, template(llama_build, name), tmp_path / "server.log"
    )
    await asyncio.to_thread(server.__enter__)
    try:
        corpus = {r.name: r for r in load(images=False)}
        if name == "Qwen3.5-4B":
            direct = {**corpus["codex-first"].body, "max_output_tokens": MAX_TOKENS}
            async with (
                ClientSession() as session,
                session.post(f"{server.url}/v1/responses", json=direct) as resp,
            ):
                answer = await resp.read()
            assert verdict(resp.status, answer)[0] is Verdict.REFUSED, "refused when sent directly"
            assert b"System message must be at the beginning" in answer
        proxy = await proxy_for(server, responses="native", messages="native")
        try:
            for recorded in ("codex-first", "codex-tool-result", "sdk-responses-parallel"):
                status, body = await send(proxy, corpus[recorded])
                assert verdict(status, body)[0] is not Verdict.REFUSED, (recorded, body[:500])
                if name == "Qwen-Qwen2.5-7B-Instruct":
                    checked = responses_checker.check(body)
                    assert checked.response is not None, recorded
            for recorded in (
                "claude-code-first",
                "claude-code-tool-result",
                "sdk-messages-parallel",
            ):
                status, body = await send(proxy, corpus[recorded])
                assert verdict(status, body)[0] is not Verdict.REFUSED, (recorded, body[:500])
                if name == "Qwen-Qwen2.5-7B-Instruct":
                    messages_checker.check(body)
        finally:
            await proxy.close()
    finally:
        server.__exit__()
