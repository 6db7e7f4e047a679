"""model_map and max_tokens_limit: what an upstream's settings change in the body it is sent, for
every protocol (the chat path here; tests/protocols/responses/ has the Responses one)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aiohttp import web

from proxy.core.errors import ConfigError
from proxy.core.forwarding import Forwarding
from proxy.settings import UpstreamSettings, load_settings
from tests.conftest import upstream_url


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
    assert Forwarding(max_tokens_limit=1).apply({"max_tokens": True}) == []


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
