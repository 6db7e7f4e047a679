"""Rewriting end to end: golden upstream streams through the running proxy, both output forms.

The normalizer's own golden tests drive it directly with counting ids; here the same inputs go
through the real shell (decoder, pump, handler) with its random id factory, so the synthesized
ids are mapped to placeholders before the bytes are compared.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support import strict_checker
from tests.support.upstreams import replay_app, serve_writes

GOLDEN = Path(__file__).parents[1] / "golden"
CASES = [c for c in json.loads((GOLDEN / "cases.json").read_text()) if c["complete"]]
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text())
FORMS = {"streamed": ".out.sse", "coalesced": ".s2.out.sse"}
NINE_CHAR_ID = re.compile(rb'"id":"([A-Za-z0-9]{9})"')


def with_placeholder_ids(output: bytes, upstream_input: bytes) -> bytes:
    """Replace ids the proxy made up (absent from the input) by their order of appearance."""
    made_up: dict[bytes, bytes] = {}
    for ident in NINE_CHAR_ID.findall(output):
        if ident not in upstream_input:
            made_up.setdefault(ident, b"ID%d" % len(made_up))
    for ident, placeholder in made_up.items():
        output = output.replace(b'"' + ident + b'"', b'"' + placeholder + b'"')
    return output


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
async def test_golden_stream_is_repaired_through_the_running_proxy(
    case: dict[str, Any], form: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream_input = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    expected = (GOLDEN / (case["name"] + FORMS[form])).read_bytes()
    upstream = await start_upstream(replay_app(upstream_input))
    dialects = case.get("dialects") or "none"
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), output=form, dialects=dialects)
    )
    resp = await proxy.post("/v1/chat/completions", json=REQUESTS[case["request"]])
    assert resp.status == 200
    output = await resp.read()
    assert with_placeholder_ids(output, upstream_input) == with_placeholder_ids(
        expected, upstream_input
    )
    if case["strict"]:
        assert strict_checker.check(output, form="S1" if form == "streamed" else "S2") == []


async def test_leaked_hermes_markup_becomes_a_tool_call_through_the_proxy(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    pieces = [
        "Sure.",
        "<tool",
        "_call>",
        '\n{"name": "get_weather", ',
        '"arguments": {"location": "Par',
        'is"}}\n</tool_call>',
    ]
    events = [
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}],
        }
        for p in pieces
    ]
    events.append(
        {
            "id": "c",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
    )
    body = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(upstream)
    resp = await proxy.post("/v1/chat/completions", json=REQUESTS["weather"])
    output = await resp.read()
    assert strict_checker.check(output) == []
    chunks = [
        orjson.loads(line[6:]) for line in output.split(b"\n\n") if line.startswith(b"data: {")
    ]
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == "Sure."
    calls = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert calls[0]["function"]["name"] == "get_weather"
    assert json.loads("".join(tc["function"]["arguments"] for tc in calls)) == {"location": "Paris"}
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


async def test_non_streaming_completion_is_repaired_through_the_proxy(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """TGI 3.0's non-streaming shape: object arguments, id "0", finish_reason "stop" (Q19, Q23)."""
    upstream_body = orjson.dumps(
        {
            "object": "chat.completion",
            "id": "",
            "model": "tgi",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "0",
                                "type": "function",
                                "function": {
                                    "name": "get_weather",
                                    "arguments": {"location": "Brooklyn"},
                                    "description": None,
                                },
                            }
                        ],
                    },
                }
            ],
        }
    )

    app = serve_writes([upstream_body], content_type="application/json")
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.post("/v1/chat/completions", json={**REQUESTS["weather"], "stream": False})
    body = await resp.json()
    choice = body["choices"][0]
    [call] = choice["message"]["tool_calls"]
    assert call["id"] == "0"
    assert json.loads(call["function"]["arguments"]) == {"location": "Brooklyn"}
    assert choice["finish_reason"] == "tool_calls"
    assert int(resp.headers["Content-Length"]) == len(orjson.dumps(body))
