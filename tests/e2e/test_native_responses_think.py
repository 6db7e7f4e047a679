"""``think_in_content`` on a native Responses stream (issue 24 item 11), through the running
proxy in front of a real aiohttp upstream serving its own ``/v1/responses`` (each event
written as it would be generated; tests/fixtures/field ``think-in-text``), read by
openai-python's stream accumulator (``client.responses.stream``): the ``<think>`` block as a
reasoning item before the message, each event at its item's ``output_index``, and the final
Response the SDK rebuilt equal to the one the terminal event carries."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import OpenAIOf, StartProxy, StartUpstream, upstream_url
from tests.support.upstreams import serve_events

BODY = (Path(__file__).parents[1] / "fixtures/field/think-in-text.responses.sse").read_bytes()
TOOLS = [{"type": "function", "name": "get_weather", "parameters": {"type": "object"}}]


@pytest.mark.parametrize("tools", [False, True], ids=["no tools", "tools (markup read)"])
async def test_openai_python_rebuilds_the_reasoning_item_and_the_message(
    start_upstream: StartUpstream, start_proxy: StartProxy, openai_of: OpenAIOf, tools: bool
) -> None:
    server = await start_upstream(serve_events(BODY))
    proxy = await start_proxy(
        UpstreamSettings(
            name="u", url=upstream_url(server), responses="native", think_in_content=True
        )
    )
    extra: dict[str, Any] = {"tools": TOOLS} if tools else {}
    added: list[tuple[int, str]] = []
    at: dict[str, set[int]] = {"reasoning": set(), "text": set()}
    async with openai_of(proxy).responses.stream(model="m", input="go", **extra) as events:
        async for event in events:
            if event.type == "response.output_item.added":
                added.append((event.output_index, event.item.type))
            elif event.type == "response.reasoning_summary_text.delta":
                at["reasoning"].add(event.output_index)
            elif event.type == "response.output_text.delta":
                at["text"].add(event.output_index)
                assert event.snapshot in ("\n\nIt is sunny", "\n\nIt is sunny in Paris.")
            elif event.type == "response.completed":
                terminal = event.response.model_dump(mode="json")
        final = await events.get_final_response()
    assert added == [(0, "reasoning"), (1, "message")]
    assert at == {"reasoning": {0}, "text": {1}}
    assert [item.type for item in final.output] == ["reasoning", "message"]
    reasoning = final.output[0]
    assert reasoning.type == "reasoning"
    assert [part.text for part in reasoning.summary] == ["\nThe user wants the weather.\n"]
    assert final.output_text == "\n\nIt is sunny in Paris."
    assert final.model_dump(mode="json")["output"] == terminal["output"]
    metrics = await (await proxy.get("/-/metrics")).text()
    assert 'kind="think-in-content"' in metrics


async def test_off_the_text_reaches_openai_python_with_its_think_block(
    start_upstream: StartUpstream, start_proxy: StartProxy, openai_of: OpenAIOf
) -> None:
    server = await start_upstream(serve_events(BODY))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), responses="native")
    )
    async with openai_of(proxy).responses.stream(model="m", input="go") as events:
        final = await events.get_final_response()
    assert [item.type for item in final.output] == ["message"]
    assert final.output_text.startswith("<think>\nThe user wants")
