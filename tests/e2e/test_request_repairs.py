"""Request repairs through the real proxy: what reaches the upstream, when, and how they are
counted (docs/repairs.md, "What it repairs in requests")."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from proxy.shell import template_probe
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.accesslog import logged
from tests.support.metrics import scrape, value

CHAT = "/v1/chat/completions"
MISTRAL_TEMPLATE = (
    '{{ raise_exception("Tool call IDs should be alphanumeric strings with length 9!") }}'
)


class Upstream:
    """A chat server that keeps each request body's bytes and answers one short text; with a
    template, it shows it at GET /props as llama-server does."""

    def __init__(self, template: str | None = None, *, loading: int = 0) -> None:
        self.bodies: list[bytes] = []
        self.props_asked = 0
        self.template = template
        self.loading = loading  # answers 503 to this many asks first

    def app(self) -> web.Application:
        async def chat(request: web.Request) -> web.Response:
            self.bodies.append(await request.read())
            message = {"role": "assistant", "content": "ok"}
            return web.json_response(
                {"id": "c", "object": "chat.completion", "created": 0, "model": "m",
                 "choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            )  # fmt: skip

        async def props(request: web.Request) -> web.Response:
            self.props_asked += 1
            if self.loading:
                self.loading -= 1
                return web.json_response({"error": "Loading model"}, status=503)
            if self.template is None:
                return web.Response(status=404)
            return web.json_response({"chat_template": self.template})

        async def models(request: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": []})

        app = web.Application()
        app.router.add_post(CHAT, chat)
        app.router.add_get("/props", props)
        app.router.add_get("/v1/models", models)
        return app


CODEX_LIKE: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "developer", "content": "one"},
        {"role": "developer", "content": "two"},
        {"role": "user", "content": "context"},
        {"role": "user", "content": "task"},
    ],
}


async def test_a_chat_request_that_needs_no_repair_goes_upstream_byte_for_byte(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Upstream()
    proxy = await start_proxy(await start_upstream(upstream.app()))
    raw = b'{"model":"m",  "messages":[{"role":"system","content":"s"},{"role":"user","content":"hi"}],"x":1}'
    resp = await proxy.post(CHAT, data=raw, headers={"Content-Type": "application/json"})
    assert resp.status == 200
    assert upstream.bodies == [raw]


async def test_auto_repairs_a_chat_request_and_counts_it(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream = Upstream()
    proxy = await start_proxy(await start_upstream(upstream.app()))
    resp = await proxy.post(CHAT, json={**CODEX_LIKE, "unknown_field": {"kept": True}})
    assert resp.status == 200
    sent = json.loads(upstream.bodies[0])
    assert sent["messages"] == [
        {"role": "system", "content": "one\n\ntwo"},
        {"role": "user", "content": "context\n\ntask"},
    ]
    assert sent["unknown_field"] == {"kept": True}
    [record] = await logged(caplog)
    assert record["request_repairs"] == {
        "developer-role": 1,
        "system-not-first": 1,
        "same-role-consecutive": 1,
    }
    samples = await scrape(proxy)
    labels = {"upstream": "up0", "model": "m", "side": "request"}
    assert value(samples, "toolcall_proxy_repairs_total", kind="system-not-first", **labels) == 1


async def test_off_forwards_a_chat_request_untouched(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Upstream()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), request_repairs="off")
    )
    raw = json.dumps(CODEX_LIKE).encode()
    await proxy.post(CHAT, data=raw, headers={"Content-Type": "application/json"})
    assert upstream.bodies == [raw]


async def test_the_template_read_from_props_decides_the_family_repairs(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Upstream(MISTRAL_TEMPLATE)
    proxy = await start_proxy(await start_upstream(upstream.app()))
    assert upstream.props_asked == 1, "asked once, at start"
    call = {"id": "call_agent1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    body = {
        "model": "m",
        "messages": [
            {"role": "user", "content": "u"},
            {"role": "assistant", "content": "", "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "call_agent1", "content": "r"},
        ],
    }
    for _ in range(2):
        await proxy.post(CHAT, json=body)
    assert upstream.props_asked == 1, "never per request"
    first, second = (json.loads(b)["messages"] for b in upstream.bodies)
    mapped = first[1]["tool_calls"][0]["id"]
    assert len(mapped) == 9
    assert mapped.isalnum()
    assert first[2]["tool_call_id"] == mapped
    assert second == first, "the same id maps the same way on every request"


async def test_a_family_setting_stands_for_a_server_that_shows_no_template(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Upstream()  # no /props, as vLLM
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), template="gemma2")
    )
    await proxy.post(
        CHAT,
        json={
            "model": "m",
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
        },
    )
    assert json.loads(upstream.bodies[0])["messages"] == [{"role": "user", "content": "s\n\nu"}]
    assert upstream.props_asked == 0, "a named family is not asked for"


async def test_a_translated_request_is_repaired_whatever_request_repairs_says(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    upstream = Upstream()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), request_repairs="off")
    )
    codex = {
        "model": "m",
        "instructions": "be brief",
        "input": [
            {"role": "developer", "content": [{"type": "input_text", "text": "rules"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "context"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "task"}]},
        ],
    }
    resp = await proxy.post("/v1/responses", json=codex)
    assert resp.status == 200
    sent = json.loads(upstream.bodies[0])
    assert [m["role"] for m in sent["messages"]] == ["system", "user"]
    assert sent["messages"][0]["content"] == "be brief\n\nrules"
    [record] = await logged(caplog)
    assert record["request_repairs"] == {"system-not-first": 1, "same-role-consecutive": 1}


@pytest.mark.parametrize(
    ("template", "told"),
    [
        (None, "no chat template at GET /props; the generic request repairs apply"),
        (MISTRAL_TEMPLATE, "its chat template needs mistral_ids"),
    ],
)
async def test_what_the_template_needs_is_logged_once_however_often_readiness_asks(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    template: str | None,
    told: str,
) -> None:
    caplog.set_level(logging.INFO)
    upstream = Upstream(template)
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(server)
    for _ in range(3):
        await proxy.get("/-/ready")
    assert upstream.props_asked >= 2, "asked at start and again on a readiness round"
    said = [r.getMessage() for r in caplog.records if r.name == "toolcall_proxy"]
    assert said == [f"upstream {upstream_url(server)}: {told}"]


async def test_an_upstream_still_loading_is_asked_again_until_it_answers(
    start_upstream: StartUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(template_probe, "RETRY_SECONDS", (0.01,))
    upstream = Upstream(MISTRAL_TEMPLATE, loading=3)  # llama-server's 503 while it loads
    proxy = await start_proxy(await start_upstream(upstream.app()))
    for _ in range(500):
        if upstream.props_asked >= 4:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    assert upstream.props_asked == 4, "asked until it answered, then no more"
    call = {"id": "call_agent1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    messages = [
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    await proxy.post(CHAT, json={"model": "m", "messages": messages})
    assert json.loads(upstream.bodies[0])["messages"][1]["tool_calls"][0]["id"] != "call_agent1"


def test_the_request_repair_settings_reach_the_core_in_the_upstreams_options():
    from proxy.core.request_repairs.needs import FAMILIES
    from proxy.settings import Settings
    from proxy.shell.app import build_upstreams

    settings = Settings(
        upstreams=[
            UpstreamSettings(
                name="a", url="http://127.0.0.1:1", request_repairs="off", template="mistral"
            ),
            UpstreamSettings(name="b", url="http://127.0.0.1:2"),
        ]
    )
    upstreams = build_upstreams(settings)
    a, b = upstreams["a"].normalize, upstreams["b"].normalize
    assert a is not None
    assert b is not None
    assert (a.request_repairs, a.template) == (False, FAMILIES["mistral"])
    assert (b.request_repairs, b.template) == (True, None)
    assert upstreams["a"].template.needs == FAMILIES["mistral"]
