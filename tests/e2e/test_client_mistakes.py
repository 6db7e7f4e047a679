"""A client's mistake is a 4xx in its protocol's shape, never a 500 or a traceback (issue 26,
items 3, 5, 10, 14 and 17's request side), through the real proxy app in front of a real
loopback upstream (tests/support/upstreams.py) that answers whatever reaches it.

Each test sends what a careless or hostile client would and checks the status, the shape of
the error (OpenAI's on chat, Responses' on /v1/responses, Anthropic's on /v1/messages), the
field it names, that nothing reached the upstream when the proxy refused, and that nothing was
logged with a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.upstreams import AnyUpstream

Proxy = TestClient[web.Request, web.Application]
Start = Callable[..., Awaitable[tuple[AnyUpstream, Proxy]]]


@pytest.fixture
def proxy_to(start_upstream: StartUpstream, start_proxy: StartProxy) -> Start:
    """The proxy in front of one AnyUpstream, ``upstream`` its per-upstream settings."""

    async def start(
        upstream: dict[str, Any] | None = None, **settings: Any
    ) -> tuple[AnyUpstream, Proxy]:
        recorder = AnyUpstream()
        url = upstream_url(await start_upstream(recorder.app))
        config = UpstreamSettings(name="u", url=url, **(upstream or {}))
        return recorder, await start_proxy(config, **settings)

    return start


def no_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logged = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not logged, [r.getMessage() for r in logged]


def error_of(protocol: str, body: bytes) -> str:
    """The message of an error body, checking it has the protocol's shape."""
    error = orjson.loads(body)
    if protocol == "messages":
        assert error["type"] == "error", error
        assert set(error["error"]) == {"type", "message"}
        return str(error["error"]["message"])
    assert set(error) == {"error"}, error
    assert isinstance(error["error"]["type"], str)
    return str(error["error"]["message"])


PATHS = {"chat": "/v1/chat/completions", "responses": "/v1/responses", "messages": "/v1/messages"}


# -- item 5: the proxy's own prefix ----------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/-/health/"),
        ("GET", "/-/nothing"),
        ("POST", "/-/metrics"),
        ("GET", "/-/"),
        ("POST", "/-/x/v1/messages"),
    ],
)
async def test_a_path_under_the_own_prefix_that_is_no_endpoint_is_404(
    method: str, path: str, proxy_to: Start, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_to()
    resp = await proxy.request(method, path, data=b"{}")
    assert resp.status == 404
    protocol = "messages" if path.endswith("/messages") and method == "POST" else "chat"
    assert "/-/health" in error_of(protocol, await resp.read())
    assert upstream.requests == []
    no_tracebacks(caplog)


# -- item 3: anything else a handler raises ----------------------------------------------------


@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
async def test_a_bug_in_the_proxy_is_a_500_in_the_protocols_shape_logged_once(
    protocol: str,
    proxy_to: Start,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bug cannot be sent by a client once the mistakes are 400s: one is put in the handler.
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("proxy.shell.handlers.plan_request", broken)
    upstream, proxy = await proxy_to()
    resp = await proxy.post(
        PATHS[protocol], json={"model": "m"}, headers={"X-Request-Id": "req-bug-1"}
    )
    assert resp.status == 500
    assert resp.headers["Content-Type"] == "application/json"
    assert "req-bug-1" in error_of(protocol, await resp.read())
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert "req-bug-1" in failures[0].getMessage()
    assert upstream.requests == []


# -- item 3: wrong-typed fields name the field -------------------------------------------------

TRANSLATE = {"responses": "translate", "messages": "translate"}
NATIVE = {"responses": "native", "messages": "native"}


@pytest.mark.parametrize(
    ("protocol", "body", "field"),
    [
        ("responses", {"input": [{"role": ["user"], "content": "x"}]}, "input[0].role"),
        ("responses", {"input": [{"role": {"a": 1}, "content": "x"}]}, "input[0].role"),
        ("responses", {"input": [{"type": ["message"], "role": "user"}]}, "input[0].type"),
        (
            "responses",
            {"input": [{"role": "user", "content": [{"type": ["input_text"], "text": "x"}]}]},
            None,  # an unknown part is dropped and named, as before: not an error
        ),
        (
            "responses",
            {"input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": True}]},
            "'tools' must be an array",
        ),
        ("responses", {"input": "x", "instructions": ["be brief"]}, "'instructions'"),
        (
            "messages",
            {"messages": [{"role": "user", "content": [{"type": ["text"], "text": "x"}]}]},
            "messages[0].content[0].type",
        ),
        (
            "messages",
            {"messages": [{"role": "user", "content": [{"type": {"a": 1}, "text": "x"}]}]},
            "messages[0].content[0].type",
        ),
        ("messages", {"system": [{"type": ["text"]}], "messages": []}, "system[0].type"),
        ("messages", {"messages": [], "tools": [{"name": "f", "input_schema": []}]}, "tools[0]"),
        (
            "messages",
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": [1]}],
                    }
                ]
            },
            "input must be an object",
        ),
    ],
)
async def test_a_wrong_typed_field_is_a_400_naming_it(
    protocol: str,
    body: dict[str, Any],
    field: str | None,
    proxy_to: Start,
    caplog: pytest.LogCaptureFixture,
) -> None:
    upstream, proxy = await proxy_to(TRANSLATE)
    resp = await proxy.post(PATHS[protocol], json={"model": "m", "max_tokens": 10, **body})
    if field is None:
        assert resp.status == 200
    else:
        assert resp.status == 400
        assert field in error_of(protocol, await resp.read())
        assert upstream.requests == []
    no_tracebacks(caplog)


@pytest.mark.parametrize("protocol", ["responses", "messages"])
@pytest.mark.parametrize("tools", [True, {"a": 1}, "f", 3])
async def test_namespace_tools_not_a_list_are_a_400_in_native_mode_too(
    protocol: str, tools: object, proxy_to: Start, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_to(NATIVE)
    body: dict[str, object]
    if protocol == "responses":
        body = {"input": "x", "tools": [{"type": "namespace", "name": "ns", "tools": tools}]}
    else:
        body = {"messages": [], "tools": tools}
    resp = await proxy.post(PATHS[protocol], json={"model": "m", "max_tokens": 10, **body})
    assert resp.status == 400
    assert "tools" in error_of(protocol, await resp.read())
    assert upstream.requests == []
    no_tracebacks(caplog)


def nested(levels: int) -> bytes:
    """A JSON value ``levels`` arrays and objects deep."""
    half = levels // 2
    return b"[" * half + b'{"a":' * (levels - half) + b"1" + b"}" * (levels - half) + b"]" * half


DEEP_PLACES = {
    "responses": {
        "tool schema": b'{"model":"m","input":"x","tools":[{"type":"function","name":"f","parameters":%s}]}',
        "arguments": b'{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":%s}]}',
        "metadata": b'{"model":"m","input":"x","stream":true,"metadata":%s}',
    },
    "messages": {
        "tool schema": b'{"model":"m","max_tokens":5,"messages":[],"tools":[{"name":"f","input_schema":{"a":%s}}]}',
        "tool input": b'{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":%s}}]}]}',
        "count_tokens": b'{"model":"m","messages":[{"role":"user","content":%s}]}',
    },
}


@pytest.mark.parametrize(
    ("protocol", "place"), [(p, place) for p, places in DEEP_PLACES.items() for place in places]
)
@pytest.mark.parametrize("mode", ["translate", "native"])
async def test_a_body_nested_past_the_limit_is_a_400_before_any_work(
    protocol: str, place: str, mode: str, proxy_to: Start, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_to({"responses": mode, "messages": mode})
    path = PATHS[protocol] + ("/count_tokens" if place == "count_tokens" else "")
    headers = {"Content-Type": "application/json"}
    # native mode's count_tokens is the upstream's: the body goes as it came, unread
    passed = mode == "native" and place == "count_tokens"
    for depth in (300, 1000):
        body = DEEP_PLACES[protocol][place] % nested(depth)
        resp = await proxy.post(path, data=body, headers=headers)
        if passed:
            assert resp.status == 200
            assert upstream.requests[-1][2] == body
        else:
            assert resp.status == 400, await resp.text()
            assert "limits.max_json_depth" in error_of(protocol, await resp.read())
    assert passed or upstream.requests == []
    no_tracebacks(caplog)


@pytest.mark.parametrize("protocol", ["responses", "messages"])
async def test_a_body_nested_to_the_limit_is_served_and_the_limit_is_a_setting(
    protocol: str, proxy_to: Start, caplog: pytest.LogCaptureFixture
) -> None:
    upstream, proxy = await proxy_to(TRANSLATE, limits={"max_json_depth": 40})
    template = DEEP_PLACES[protocol]["tool schema"]
    headers = {"Content-Type": "application/json"}
    # the value is nested in 3 (Responses) or 4 (Messages) levels of the body
    inner = 40 - (3 if protocol == "responses" else 4)
    resp = await proxy.post(PATHS[protocol], data=template % nested(inner), headers=headers)
    assert resp.status == 200, await resp.text()
    resp = await proxy.post(PATHS[protocol], data=template % nested(inner + 1), headers=headers)
    assert resp.status == 400
    assert "more than 40 levels" in error_of(protocol, await resp.read())
    assert len(upstream.requests) == 1
    no_tracebacks(caplog)


async def test_a_chat_body_nested_past_the_limit_is_400_when_the_proxy_rewrites_it(
    proxy_to: Start,
) -> None:
    upstream, proxy = await proxy_to({"model_map": {"m": "other"}})
    body = b'{"model":"m","messages":[],"x":%s}' % nested(300)
    headers = {"Content-Type": "application/json"}
    resp = await proxy.post(PATHS["chat"], data=body, headers=headers)
    assert resp.status == 400
    assert "limits.max_json_depth" in error_of("chat", await resp.read())
    assert upstream.requests == []


async def test_a_chat_body_the_proxy_does_not_rewrite_goes_as_it_came_however_deep(
    proxy_to: Start,
) -> None:
    upstream, proxy = await proxy_to()
    body = b'{"model":"m","messages":[],"x":%s}' % nested(300)
    headers = {"Content-Type": "application/json"}
    resp = await proxy.post(PATHS["chat"], data=body, headers=headers)
    assert resp.status == 200
    assert [sent for _, _, sent in upstream.requests] == [body]


# -- item 14: tool names that collide once flattened -------------------------------------------


@pytest.mark.parametrize(
    ("tools", "named"),
    [
        (
            [
                {"type": "function", "name": "ns__fn"},
                {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "fn"}]},
            ],
            ["function 'ns__fn' (tools[0])", "function 'fn' of namespace 'ns' (tools[1].tools[0])"],
        ),
        (
            [{"type": "function", "name": "edit"}, {"type": "custom", "name": "edit"}],
            ["function 'edit' (tools[0])", "custom tool 'edit' (tools[1])"],
        ),
        (
            [{"type": "custom", "name": "x"}, {"type": "function", "name": "x"}],
            ["custom tool 'x' (tools[0])", "function 'x' (tools[1])"],
        ),
    ],
)
async def test_two_tools_that_would_reach_the_upstream_under_one_name_are_a_400_naming_both(
    tools: list[dict[str, Any]], named: list[str], proxy_to: Start
) -> None:
    upstream, proxy = await proxy_to(TRANSLATE)
    resp = await proxy.post(PATHS["responses"], json={"model": "m", "input": "x", "tools": tools})
    assert resp.status == 400
    message = error_of("responses", await resp.read())
    assert all(name in message for name in named), message
    assert upstream.requests == []


async def test_tools_of_one_name_in_different_namespaces_do_not_collide(proxy_to: Start) -> None:
    upstream, proxy = await proxy_to(TRANSLATE)
    tools = [
        {"type": "namespace", "name": "a", "tools": [{"type": "function", "name": "fn"}]},
        {"type": "namespace", "name": "b", "tools": [{"type": "function", "name": "fn"}]},
        {"type": "function", "name": "fn"},
    ]
    resp = await proxy.post(PATHS["responses"], json={"model": "m", "input": "x", "tools": tools})
    assert resp.status == 200
    names = [t["function"]["name"] for t in upstream.bodies[0]["tools"]]
    assert names == ["a__fn", "b__fn", "fn"]


# -- item 17: the smaller ones -------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["responses", "messages"])
@pytest.mark.parametrize("stream", ["false", "true", 0, 1, [], {}])
async def test_a_stream_flag_that_is_no_boolean_is_a_400(
    protocol: str, stream: object, proxy_to: Start
) -> None:
    upstream, proxy = await proxy_to(TRANSLATE)
    body = {"model": "m", "max_tokens": 5, "input": "x", "messages": [], "stream": stream}
    resp = await proxy.post(PATHS[protocol], json=body)
    assert resp.status == 400
    assert "stream" in error_of(protocol, await resp.read())
    assert upstream.requests == []


@pytest.mark.parametrize("mode", ["translate", "native"])
@pytest.mark.parametrize("name", ["", None, 3])
async def test_a_messages_tool_without_a_name_is_a_400_before_the_upstream_is_asked(
    mode: str, name: object, proxy_to: Start
) -> None:
    upstream, proxy = await proxy_to({"messages": mode})
    tools = [{"name": name, "input_schema": {"type": "object"}}]
    body = {"model": "m", "max_tokens": 5, "messages": [], "tools": tools, "stream": True}
    resp = await proxy.post(PATHS["messages"], json=body)
    assert resp.status == 400
    assert "tools[0].name" in error_of("messages", await resp.read())
    assert upstream.requests == []  # native mode too: refused before anything was generated


@pytest.mark.parametrize(
    ("source", "field"),
    [
        ({"type": "base64", "media_type": {"a": 1}, "data": "AAAA"}, "source.media_type"),
        ({"type": "base64", "media_type": "image/png", "data": ["AAAA"]}, "source.data"),
        ({"type": "base64", "data": "AAAA"}, "source.media_type"),
        ({"type": "url", "url": {"href": "http://x"}}, "source.url"),
    ],
)
async def test_an_image_source_with_fields_that_are_not_strings_is_a_400(
    source: dict[str, Any], field: str, proxy_to: Start
) -> None:
    upstream, proxy = await proxy_to(TRANSLATE)
    content = [{"type": "text", "text": "see"}, {"type": "image", "source": source}]
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": content}]}
    resp = await proxy.post(PATHS["messages"], json=body)
    assert resp.status == 400
    assert f"messages[0].content[1].{field}" in error_of("messages", await resp.read())
    assert upstream.requests == []


@pytest.mark.parametrize(
    ("protocol", "body"),
    [
        ("responses", {"input": [{"role": "x" * 1_000_000, "content": "x"}]}),
        ("messages", {"messages": [{"role": "x" * 1_000_000, "content": "x"}]}),
        ("messages", {"messages": [], "tool_choice": {"type": "x" * 1_000_000}}),
        (
            "responses",
            {"input": "x", "tools": [{"type": "namespace", "name": "x" * 1_000_000, "tools": 1}]},
        ),
        ("chat", {"model": "x" * 1_000_000}),
    ],
)
async def test_a_400_quotes_at_most_a_little_of_the_offending_value(
    protocol: str, body: dict[str, Any], start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    recorder = AnyUpstream()
    url = upstream_url(await start_upstream(recorder.app))
    # two upstreams of their own models: the chat case's model names none of them
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=url, models=["m"]),
        UpstreamSettings(name="b", url=url, models=["n"]),
    )
    resp = await proxy.post(PATHS[protocol], json={"model": "m", "max_tokens": 5, **body})
    assert resp.status in (400, 404)
    answer = await resp.read()
    assert len(answer) < 1000
    assert "xxxxx" in error_of(protocol, answer)


@pytest.mark.parametrize(
    ("body", "what"),
    [
        (b'{"model": "m", "messages": [', "not valid JSON"),
        (b"model=m", "not valid JSON"),
        (b'["m"]', "not a JSON object"),
    ],
)
async def test_a_body_that_is_no_json_object_says_so_when_it_cannot_be_routed(
    body: bytes, what: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    recorder = AnyUpstream()
    url = upstream_url(await start_upstream(recorder.app))
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=url, models=["a"]),
        UpstreamSettings(name="b", url=url, models=["b"]),
    )
    headers = {"Content-Type": "application/json"}
    resp = await proxy.post(PATHS["chat"], data=body, headers=headers)
    assert resp.status == 400
    message = error_of("chat", await resp.read())
    assert what in message
    assert "names no model" in message
    # a JSON object without a model is still the router's 404
    resp = await proxy.post(PATHS["chat"], json={"messages": []})
    assert resp.status == 404
    assert recorder.requests == []
