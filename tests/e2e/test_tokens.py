"""Token accounting (issue 28 item 4): the usage the upstream reported, counted in
``toolcall_proxy_tokens_total`` and the access line, through the real proxy in front of real
upstreams replaying recorded streams; nothing estimated, and nothing asked of the upstream
that the client did not ask."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from proxy.shell.accesslog import ACCESS_LOGGER
from tests.conftest import UPSTREAM_FIXTURES, StartProxy, StartUpstream, upstream_url
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value
from tests.support.upstreams import CHAT_STREAM, AnyUpstream, replay_app

PROTOCOL_FIXTURES = Path(__file__).parent.parent / "fixtures" / "protocols"
CHAT = "/v1/chat/completions"
TOKENS = "toolcall_proxy_tokens_total"


def _chunk(delta: dict[str, Any], *, finish: str | None = None, **extra: Any) -> bytes:
    chunk = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def _usage_upstream() -> web.Application:
    """AnyUpstream, whose answers report 1 prompt and 1 completion token, but for a chat
    stream asked for usage: it ends with a usage chunk (as vLLM and OpenAI send it)."""
    any_upstream = AnyUpstream()
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    stream = CHAT_STREAM.replace(
        b"data: [DONE]",
        b"data: " + orjson.dumps({**_CHUNK, "choices": [], "usage": usage}) + b"\n\ndata: [DONE]",
    )

    async def handle(request: web.Request) -> web.StreamResponse:
        body = await request.json() if request.can_read_body else None
        wants = isinstance(body, dict) and body.get("stream_options") == {"include_usage": True}
        if request.path == CHAT and wants:
            return web.Response(body=stream, content_type="text/event-stream")
        return await any_upstream._any(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


_CHUNK = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}


async def _tokens(proxy: Any, upstream: str, model: str) -> dict[str, float]:
    samples = await scrape(proxy)
    found = {}
    for kind in ("prompt", "completion", "reasoning", "cached"):
        count = value(samples, TOKENS, upstream=upstream, model=model, kind=kind)
        if count is not None:
            found[kind] = count
    return found


async def _stream(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    body: bytes,
    path: str,
    request: dict[str, Any],
    **upstream_settings: Any,
) -> tuple[Any, dict[str, Any]]:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="up", url=upstream_url(upstream), **upstream_settings)
    )
    resp = await proxy.post(path, json=request)
    assert resp.status == 200
    await resp.read()
    [record] = await logged(caplog)
    return proxy, record


async def test_chat_stream_counts_the_last_chunks_usage_with_its_details(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # DeepSeek's own API: "usage": null on every chunk, then a usage chunk with both details
    body = (UPSTREAM_FIXTURES / "deepseek-api-canonical-with-reasoning.sse").read_bytes()
    request = {"model": "ds", "stream": True, "stream_options": {"include_usage": True}}
    proxy, record = await _stream(start_upstream, start_proxy, caplog, body, CHAT, request)
    expected = {"prompt": 374, "completion": 61, "reasoning": 17, "cached": 256}
    assert record["tokens"] == expected
    assert await _tokens(proxy, "up", "ds") == expected


async def test_chat_stream_with_tools_counts_llamacpps_final_usage(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    body = (UPSTREAM_FIXTURES / "llamacpp-b5494-one-tool-call.sse").read_bytes()
    meta = orjson.loads((UPSTREAM_FIXTURES / "llamacpp-b5494-one-tool-call.meta.json").read_bytes())
    proxy, record = await _stream(start_upstream, start_proxy, caplog, body, CHAT, meta["request"])
    assert record["rewritten"] is True  # the normalizer's stream
    assert record["repairs"]
    assert record["tokens"] == {"prompt": 344, "completion": 60}
    model = meta["request"]["model"]
    assert await _tokens(proxy, "up", model) == {"prompt": 344, "completion": 60}


async def test_usage_in_a_chunk_that_goes_out_unparsed_is_counted(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """vLLM's continuous usage: every text chunk carries the running totals and passes the
    byte checks unparsed; the last of them is the one counted."""
    body = b"".join(
        [
            _chunk({"role": "assistant", "content": ""}),
            *(
                _chunk({"content": f"w{i} "}, usage={"prompt_tokens": 9, "completion_tokens": i})
                for i in range(1, 6)
            ),
            _chunk({}, finish="stop"),
            b"data: [DONE]\n\n",
        ]
    )
    proxy, record = await _stream(
        start_upstream, start_proxy, caplog, body, CHAT, {"model": "v", "stream": True}
    )
    assert record["tokens"] == {"prompt": 9, "completion": 5}
    assert await _tokens(proxy, "up", "v") == {"prompt": 9, "completion": 5}


async def test_chat_stream_without_usage_counts_nothing_and_asks_for_none(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = b"".join([_chunk({"role": "assistant", "content": "hi"}), _chunk({}, finish="stop")])
    seen: list[bytes] = []

    async def record_then_replay(request: web.Request) -> web.StreamResponse:
        seen.append(await request.read())
        return web.Response(body=body + b"data: [DONE]\n\n", content_type="text/event-stream")

    app = web.Application()
    app.router.add_post(CHAT, record_then_replay)
    server = await start_upstream(app)
    proxy = await start_proxy(UpstreamSettings(name="up", url=upstream_url(server)))
    sent = orjson.dumps({"model": "m", "stream": True, "messages": []})
    resp = await proxy.post(CHAT, data=sent, headers={"Content-Type": "application/json"})
    assert resp.status == 200
    await resp.read()
    [record] = await logged(caplog)
    assert seen == [sent]  # no stream_options added: the client's stream stays its own
    assert record["tokens"] == {}
    assert await _tokens(proxy, "up", "m") == {}


async def test_chat_json_answer_counts_its_usage(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = await start_upstream(AnyUpstream().app)  # its completion reports 1 and 1
    proxy = await start_proxy(UpstreamSettings(name="up", url=upstream_url(upstream)))
    resp = await proxy.post(CHAT, json={"model": "m", "messages": []})
    assert resp.status == 200
    await resp.read()
    [record] = await logged(caplog)
    assert record["tokens"] == {"prompt": 1, "completion": 1}
    assert await _tokens(proxy, "up", "m") == {"prompt": 1, "completion": 1}


async def test_native_responses_stream_counts_the_terminal_usage(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    body = PROTOCOL_FIXTURES / "responses-openai-gpt51codexmax-reasoning-summary-then-call.sse"
    request = {"model": "gpt", "stream": True, "input": "hi"}
    proxy, record = await _stream(
        start_upstream,
        start_proxy,
        caplog,
        body.read_bytes(),
        "/v1/responses",
        request,
        responses="native",
    )
    expected = {"prompt": 134, "completion": 28, "reasoning": 0, "cached": 0}
    assert record["tokens"] == expected
    assert await _tokens(proxy, "up", "gpt") == expected


async def test_native_messages_stream_merges_start_and_delta_usage(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    body = (PROTOCOL_FIXTURES / "messages-anthropic-haiku35-text-then-tool.sse").read_bytes()
    request = {"model": "claude", "stream": True, "max_tokens": 64, "messages": []}
    proxy, record = await _stream(
        start_upstream, start_proxy, caplog, body, "/v1/messages", request, messages="native"
    )
    # message_start: 530 in, 0 + 0 from the cache, 2 out; message_delta: 87 out
    expected = {"prompt": 530, "completion": 87, "cached": 0}
    assert record["tokens"] == expected
    assert await _tokens(proxy, "up", "claude") == expected


@pytest.mark.parametrize(
    ("path", "request_body", "expected"),
    [
        ("/v1/responses", {"model": "m", "input": "hi"}, {"prompt": 1, "completion": 1}),
        (
            "/v1/messages",
            {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]},
            {"prompt": 1, "completion": 1},
        ),
    ],
)
@pytest.mark.parametrize("mode", ["native", "translate"])
@pytest.mark.parametrize("stream", [False, True])
async def test_responses_and_messages_count_in_both_modes(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    path: str,
    request_body: dict[str, Any],
    expected: dict[str, int],
    mode: str,
    stream: bool,
) -> None:
    """Native: the server's own usage (its Response or Message, streamed or whole);
    translate: the chat upstream's, which the proxy asks for (the client's protocol carries
    usage; a chat client's request is never changed so)."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = await start_upstream(_usage_upstream())
    protocol = path.rsplit("/", 1)[1]
    proxy = await start_proxy(
        UpstreamSettings(name="up", url=upstream_url(upstream), **{protocol: mode})
    )
    resp = await proxy.post(path, json={**request_body, "stream": stream})
    assert resp.status == 200
    await resp.read()
    [record] = await logged(caplog)
    assert record["tokens"] == expected
    assert await _tokens(proxy, "up", "m") == expected
