"""model_map and max_tokens_limit: what an upstream's settings change in the body it is sent, for
every protocol (the chat path here; tests/core/protocols/responses/ has the Responses one)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from proxy.core.errors import ClientRequestError, ConfigError
from proxy.core.forwarding import Forwarding
from proxy.settings import UpstreamSettings, load_settings
from tests.conftest import upstream_url
from tests.support.upstreams import AnyUpstream


def test_an_exact_name_wins_over_a_glob_and_the_first_glob_wins():
    forwarding = Forwarding({"gpt-5*": "a", "gpt-5-codex": "b", "gpt-*": "c"})
    assert forwarding.upstream_model("gpt-5-codex") == "b"
    assert forwarding.upstream_model("gpt-5.1") == "a"
    assert forwarding.upstream_model("gpt-4o") == "c"
    assert forwarding.upstream_model("claude") is None


def test_every_token_limit_key_is_capped_and_nothing_else():
    body: dict[str, Any] = {
        "max_tokens": 64000,
        "max_completion_tokens": 10,
        "max_output_tokens": 9000,
        "n": 9000,
    }
    assert Forwarding(max_tokens_limit=4096).apply(body) == ["max_tokens", "max_output_tokens"]
    assert body == {
        "max_tokens": 4096,
        "max_completion_tokens": 10,
        "max_output_tokens": 4096,
        "n": 9000,
    }
    # issue 26 item 10: a value that is no number is refused (it was passed on uncapped)
    with pytest.raises(ClientRequestError, match="max_tokens: must be a number"):
        Forwarding(max_tokens_limit=1).apply({"max_tokens": True})


@pytest.mark.parametrize("asked", [99999, 99999.0, 1e9, "99999", "1e9", " 4097 ", "inf"])
def test_every_numeric_form_past_the_limit_is_capped(asked: object):
    body = {"max_tokens": asked}
    assert Forwarding(max_tokens_limit=4096).apply(body) == ["max_tokens"]
    assert body == {"max_tokens": 4096}


@pytest.mark.parametrize("asked", [100, 4096, 100.0, "100", None])
def test_a_numeric_form_within_the_limit_goes_as_it_came(asked: object):
    body = {"max_tokens": asked}
    assert Forwarding(max_tokens_limit=4096).apply(body) == []
    assert body == {"max_tokens": asked}


@pytest.mark.parametrize("asked", [True, False, "many", "nan", [1], {"n": 1}])
def test_a_token_limit_that_is_no_number_is_refused(asked: object):
    with pytest.raises(ClientRequestError, match="max_output_tokens: must be a number"):
        Forwarding(max_tokens_limit=4096).apply({"max_output_tokens": asked})


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        ({"model_map": {"": "x"}}, "model_map"),
        ({"model_map": {"a": ""}}, "model_map"),
        ({"max_tokens_limit": 0}, "max_tokens_limit"),
    ],
)
def test_bad_values_stop_the_start_naming_the_key(upstream: dict[str, Any], message: str):
    with pytest.raises(ConfigError, match=message):
        load_settings(upstreams=[{"name": "a", "url": "http://127.0.0.1:1", **upstream}])


class Recorder:
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/chat/completions", self._chat)

    async def _chat(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        return web.json_response(
            {
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": "upstream-name",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hi"},
                        "finish_reason": "stop",
                    }
                ],
            }
        )


async def test_a_chat_request_gets_the_mapped_model_and_the_capped_limit(
    start_upstream, start_proxy
):
    recorder = Recorder()
    server = await start_upstream(recorder.app)
    settings = UpstreamSettings(
        name="up",
        url=upstream_url(server),
        models=["claude-*"],
        model_map={"claude-*": "qwen3"},
        max_tokens_limit=1024,
    )
    proxy = await start_proxy(settings)
    request = {
        "model": "claude-sonnet",
        "messages": [{"role": "user", "content": "x"}],
        "max_tokens": 64000,
    }
    resp = await proxy.post("/v1/chat/completions", json=request)
    assert resp.status == 200
    sent = json.loads(recorder.bodies[0])
    assert (sent["model"], sent["max_tokens"]) == ("qwen3", 1024)


async def test_a_body_with_nothing_to_change_goes_byte_for_byte(start_upstream, start_proxy):
    recorder = Recorder()
    server = await start_upstream(recorder.app)
    settings = UpstreamSettings(
        name="up", url=upstream_url(server), model_map={"other": "x"}, max_tokens_limit=1024
    )
    proxy = await start_proxy(settings)
    body = b'{"model":  "m", "messages": [{"role": "user", "content": "x"}], "max_tokens": 10}'
    resp = await proxy.post(
        "/v1/chat/completions", data=body, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 200
    assert recorder.bodies == [body]


@pytest.mark.parametrize(
    ("path", "request_body", "key"),
    [
        ("/v1/chat/completions", {"messages": [], "max_tokens": "99999"}, "max_tokens"),
        ("/v1/chat/completions", {"messages": [], "max_completion_tokens": 1e9}, None),
        ("/v1/responses", {"input": "x", "max_output_tokens": 99999.0}, "max_tokens"),
        ("/v1/messages", {"messages": [], "max_tokens": "1e9"}, "max_tokens"),
    ],
)
async def test_numeric_forms_are_capped_through_the_proxy_for_every_protocol(
    path: str, request_body: dict[str, Any], key: str | None, start_upstream, start_proxy
):
    recorder = AnyUpstream()
    server = await start_upstream(recorder.app)
    proxy = await start_proxy(
        UpstreamSettings(name="up", url=upstream_url(server), max_tokens_limit=1024)
    )
    resp = await proxy.post(path, json={"model": "m", **request_body})
    assert resp.status == 200, await resp.text()
    [sent] = recorder.bodies
    capped = {k: v for k, v in sent.items() if "max_" in k}
    assert capped == {key or "max_completion_tokens": 1024}


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/responses", "/v1/messages"])
async def test_a_token_limit_that_is_no_number_is_400_through_the_proxy(
    path: str, start_upstream, start_proxy
):
    recorder = AnyUpstream()
    server = await start_upstream(recorder.app)
    proxy = await start_proxy(
        UpstreamSettings(name="up", url=upstream_url(server), max_tokens_limit=1024)
    )
    asked = {"max_output_tokens": True} if path == "/v1/responses" else {"max_tokens": True}
    resp = await proxy.post(path, json={"model": "m", "messages": [], "input": "x", **asked})
    assert resp.status == 400
    assert "max_" in await resp.text()
    assert recorder.requests == []
