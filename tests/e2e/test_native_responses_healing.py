"""Issue 25's heal and coercion on native Responses, through the running proxy in front of a
real aiohttp upstream serving its own ``/v1/responses`` (each event written as it would be
generated), read by openai-python's stream accumulator (``client.responses.stream``): the
healed call as the SDK rebuilds it from the deltas and as the final Response says it; a
response the token limit cut, and a call whose heal does not fit its tool's schema, as they
would reach the client without healing."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.core.events import FinishReason
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.arguments.responses_streams import call, stream
from tests.support.streams import chunks
from tests.support.upstreams import serve_events

SCHEMA = {
    "type": "object",
    "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["location"],
}
TOOLS = [
    {"type": "function", "name": name, "parameters": SCHEMA} for name in ("get_weather", "get_time")
]
HEALED = {"location": "Paris", "days": 2}


def broken_calls(*, finish: FinishReason = FinishReason.TOOL_CALLS) -> bytes:
    """Text, then two calls whose arguments are almost JSON (single quotes, a trailing comma;
    a string for an integer), streamed a few characters a delta."""
    weather = "{'location': 'Paris', 'days': 2,}"
    time = '{"location": "Paris", "days": "2"}'
    return stream(
        "Checking.",
        call(0, "get_weather", *(weather[i : i + 5] for i in range(0, len(weather), 5))),
        call(1, "get_time", *(time[i : i + 5] for i in range(0, len(time), 5))),
        finish=finish,
    )


async def proxies(
    start_upstream: StartUpstream, start_proxy: StartProxy, body: bytes
) -> tuple[Any, Any]:
    """The proxy with heal and coerce on, and one without, before the same upstream."""
    server = await start_upstream(serve_events(body))
    fixing = await start_proxy(
        UpstreamSettings(
            name="u",
            url=upstream_url(server),
            responses="native",
            heal_arguments=True,
            coerce_arguments=True,
        )
    )
    plain = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), responses="native")
    )
    return fixing, plain


async def raw(proxy: Any) -> bytes:
    resp = await proxy.post(
        "/v1/responses", json={"model": "m", "input": "go", "tools": TOOLS, "stream": True}
    )
    assert resp.status == 200
    return bytes(await resp.read())


async def test_openai_python_rebuilds_the_healed_and_coerced_calls(
    start_upstream: StartUpstream, start_proxy: StartProxy, openai_of: Any
) -> None:
    fixing, _ = await proxies(start_upstream, start_proxy, broken_calls())
    client = openai_of(fixing)
    rebuilt: dict[int, str] = {}  # each call's arguments as the SDK accumulated its deltas
    kinds: list[str] = []
    async with client.responses.stream(model="m", input="go", tools=TOOLS) as events:
        async for event in events:
            kinds.append(event.type)
            if event.type == "response.function_call_arguments.delta":
                rebuilt[event.output_index] = event.snapshot
        final = await events.get_final_response()
    assert final.status == "completed"
    assert final.output_text == "Checking."
    calls = [item for item in final.output if item.type == "function_call"]
    assert [(c.name, orjson.loads(c.arguments)) for c in calls] == [
        ("get_weather", HEALED),
        ("get_time", HEALED),
    ]
    assert {i: orjson.loads(text) for i, text in rebuilt.items()} == {1: HEALED, 2: HEALED}
    assert kinds.count("response.function_call_arguments.delta") == 2  # one a call
    metrics = await (await fixing.get("/-/metrics")).text()
    for kind in ("args-healed", "args-coerced"):
        assert f'kind="{kind}"' in metrics


async def test_a_response_the_token_limit_cut_is_left_as_without_healing(
    start_upstream: StartUpstream, start_proxy: StartProxy, openai_of: Any
) -> None:
    fixing, plain = await proxies(
        start_upstream, start_proxy, broken_calls(finish=FinishReason.LENGTH)
    )
    out = await raw(fixing)
    assert out == await raw(plain)
    [end] = [e for e in chunks(out) if e["type"] == "response.incomplete"]
    assert end["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    stream_ = await openai_of(fixing).responses.create(
        model="m", input="go", tools=TOOLS, stream=True
    )
    texts: dict[int, str] = {}
    async for event in stream_:
        if event.type == "response.function_call_arguments.done":
            texts[event.output_index] = event.arguments
    assert texts == {
        1: "{'location': 'Paris', 'days': 2,}",
        2: '{"location": "Paris", "days": "2"}',
    }


async def test_a_heal_that_does_not_fit_the_schema_is_left_as_without_healing(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    misfit = "{'location': ['Paris'], 'days': 2,}"  # heals into JSON, no string location
    body = stream("Checking.", call(0, "get_weather", misfit[:9], misfit[9:]))
    fixing, plain = await proxies(start_upstream, start_proxy, body)
    out = await raw(fixing)
    assert out == await raw(plain)
    [done] = [e for e in chunks(out) if e["type"] == "response.function_call_arguments.done"]
    assert done["arguments"] == misfit


async def test_text_after_a_healed_call_reaches_openai_python_in_its_place(
    start_upstream: StartUpstream, start_proxy: StartProxy, openai_of: Any
) -> None:
    """The message after a held call waits behind it: the SDK sees the call's item, then the
    message's, each event at its item's output_index."""
    weather = "{'location': 'Paris', 'days': 2,}"
    body = stream(call(0, "get_weather", weather[:6], weather[6:]), "It is sunny.")
    fixing, _ = await proxies(start_upstream, start_proxy, body)
    added: list[tuple[int, str]] = []
    text_at: set[int] = set()
    async with openai_of(fixing).responses.stream(model="m", input="go", tools=TOOLS) as events:
        async for event in events:
            if event.type == "response.output_item.added":
                added.append((event.output_index, event.item.type))
            elif event.type == "response.output_text.delta":
                text_at.add(event.output_index)
        final = await events.get_final_response()
    assert added == [(0, "function_call"), (1, "message")]
    assert text_at == {1}
    assert [item.type for item in final.output] == ["function_call", "message"]
    assert final.output_text == "It is sunny."
    assert orjson.loads(final.output[0].arguments) == HEALED
