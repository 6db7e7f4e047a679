"""Wrong-typed fields over the Responses and Messages request schemas, through the real proxy
app in front of a real loopback upstream (hypothesis; issue 26's "Done when").

A valid request of each protocol uses every field the proxy reads; each example replaces one
to three of its values (at any depth) with a value of another type (null, a boolean, a number,
a string, a list, an object, JSON nested deeper than any limit) or removes them, and sends it
to an upstream in translate mode and one in native mode (``max_tokens_limit`` and
``model_map`` on, so the forwarding rewrites run too). Whatever comes back must be the
client's own doing, never the proxy's failure: no 5xx, an error body in the protocol's shape,
a 200 stream that ends cleanly, and no traceback or error in the log (a logging error fails
the test too: tests/conftest.py).

The suite's hypothesis profile runs 200 examples per protocol and mode; each takes a few
milliseconds.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import orjson
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.streams import read_until_error
from tests.support.upstreams import AnyUpstream

RESPONSES: dict[str, Any] = {
    "model": "m",
    "stream": True,
    "instructions": "be brief",
    "input": [
        {"role": "developer", "content": "rules"},
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "input_text", "text": "hi"},
                {"type": "input_image", "image_url": "http://x/y.png", "detail": "low"},
            ],
        },
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "x"},
        {
            "type": "custom_tool_call_output",
            "call_id": "c2",
            "output": [{"type": "input_text", "text": "ok"}],
        },
        {"type": "function_call", "call_id": "c3", "name": "h", "namespace": "ns", "arguments": {}},
        {"type": "reasoning", "summary": []},
    ],
    "tools": [
        {
            "type": "function",
            "name": "f",
            "description": "d",
            "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "strict": False,
        },
        {
            "type": "custom",
            "name": "g",
            "description": "d",
            "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
        },
        {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "h"}]},
        {"type": "web_search"},
    ],
    "tool_choice": {"type": "function", "name": "f"},
    "max_output_tokens": 100,
    "temperature": 0.5,
    "top_p": 1,
    "parallel_tool_calls": True,
    "reasoning": {"effort": "low", "summary": "auto"},
    "text": {
        "format": {"type": "json_schema", "name": "s", "schema": {"type": "object"}},
        "verbosity": "low",
    },
    "metadata": {"k": "v"},
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "user": "u",
    "stop": ["x"],
}
MESSAGES: dict[str, Any] = {
    "model": "m",
    "max_tokens": 100,
    "stream": True,
    "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
    "messages": [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "hi"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
                {"type": "image", "source": {"type": "url", "url": "http://x/y.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "t", "signature": "s"},
                {"type": "text", "text": "calling"},
                {"type": "tool_use", "id": "tu1", "name": "f", "input": {"a": 1}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "tu1",
                    "content": [{"type": "text", "text": "ok"}],
                    "is_error": False,
                },
                {"type": "text", "text": "more"},
            ],
        },
        {"role": "system", "content": "inner"},
    ],
    "tools": [
        {
            "name": "f",
            "description": "d",
            "input_schema": {"type": "object", "properties": {"a": {"type": "integer"}}},
        },
        {"type": "web_search_20250305", "name": "web_search"},
    ],
    "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
    "stop_sequences": ["x"],
    "temperature": 0.5,
    "top_p": 1,
    "top_k": 5,
    "thinking": {"type": "enabled", "budget_tokens": 2048},
    "metadata": {"user_id": "u"},
}
BASES = {"responses": RESPONSES, "messages": MESSAGES}
PATHS = {
    "responses": ["/v1/responses"],
    "messages": ["/v1/messages", "/v1/messages/count_tokens"],
}
DEEP = "\x00deep\x00"  # stands for JSON nested 300 deep, written into the body by hand
NESTED = b"[" * 150 + b'{"a":' * 150 + b"1" + b"}" * 150 + b"]" * 150


def paths(value: object, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in ``value`` a mutation can reach: each key and index, at every depth."""
    found = [prefix]
    if isinstance(value, dict):
        for key, inner in value.items():
            found += paths(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            found += paths(inner, (*prefix, index))
    return found


scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(["", "x", "99999", "1e9", "false", "user", "function", "message", "text"]),
)
wrong = st.one_of(
    scalars,
    st.lists(scalars, max_size=3),
    st.dictionaries(st.sampled_from(["type", "name", "a", "text"]), scalars, max_size=3),
    st.just(DEEP),
    st.just("x" * 5000),
)


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    body = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(paths(body)))
        if not where:
            continue  # the body itself stays an object: not an object is a test of its own
        parent: Any = body
        for step in where[:-1]:
            parent = parent[step]
        if draw(st.booleans()) and isinstance(parent, dict):
            del parent[where[-1]]
        else:
            parent[where[-1]] = draw(wrong)
    return body


def encoded(body: dict[str, Any]) -> bytes:
    # json, not orjson: it writes integers past 64 bits, which a client may send
    return json.dumps(body).encode().replace(json.dumps(DEEP).encode(), NESTED)


@pytest.fixture
async def proxies(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> dict[str, TestClient[web.Request, web.Application]]:
    upstream = AnyUpstream()
    url = upstream_url(await start_upstream(upstream.app))
    common: dict[str, Any] = {"max_tokens_limit": 1000, "model_map": {"m": "mapped"}}
    return {
        mode: await start_proxy(
            UpstreamSettings(name=mode, url=url, responses=mode, messages=mode, **common)
        )
        for mode in ("translate", "native")
    }


def error_shape(protocol: str, body: bytes) -> None:
    error = orjson.loads(body)
    if protocol == "messages":
        assert error["type"] == "error"
        assert isinstance(error["error"]["message"], str)
    else:
        assert isinstance(error["error"]["message"], str)


@pytest.mark.parametrize("protocol", sorted(BASES))
@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_wrong_typed_fields_never_make_the_proxy_fail(
    protocol: str,
    data: st.DataObject,
    proxies: dict[str, TestClient[web.Request, web.Application]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    body = data.draw(mutated(BASES[protocol]), label="body")
    mode = data.draw(st.sampled_from(sorted(proxies)), label="mode")
    path = data.draw(st.sampled_from(PATHS[protocol]), label="path")
    caplog.clear()
    resp = await proxies[mode].post(
        path, data=encoded(body), headers={"Content-Type": "application/json"}
    )
    received, cut = await read_until_error(resp)
    assert resp.status < 500, received[:500]
    assert cut is None, "a stream was cut"
    if resp.status >= 400:
        error_shape(protocol, received)
    failures = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert not failures, [r.getMessage() for r in failures]
