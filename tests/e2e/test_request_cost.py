"""What a large translated request may cost (issue 26 item 4): ``limits.max_tools`` refuses a
request with more tools than that before a single one is converted, and a Responses stream
echoes the request's tools once, in its last Response object, not in every one.

The figures (RSS and CPU for 1.5 million tools, the event loop's longest stall) are measured
by ``python -m bench.translate_request`` (docs/performance.md).
"""

from __future__ import annotations

import gc
import io
import logging
import threading
from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from proxy.shell.handlers import OFF_LOOP_BYTES
from proxy.shell.request_body import parse_json
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.protocols.responses import checker
from tests.support.upstreams import AnyUpstream

PATHS = {"responses": "/v1/responses", "messages": "/v1/messages"}


def tool(protocol: str, name: str) -> dict[str, Any]:
    if protocol == "responses":
        return {"type": "function", "name": name, "parameters": {"type": "object"}}
    return {"name": name, "input_schema": {"type": "object"}}


def request(protocol: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    if protocol == "responses":
        return {"model": "m", "input": "hi", "tools": tools}
    return {"model": "m", "max_tokens": 5, "messages": [], "tools": tools}


@pytest.mark.parametrize("mode", ["translate", "native"])
@pytest.mark.parametrize("protocol", sorted(PATHS))
async def test_tools_past_max_tools_are_a_400_and_up_to_it_are_served(
    protocol: str, mode: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = AnyUpstream()
    url = upstream_url(await start_upstream(upstream.app))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=url, responses=mode, messages=mode),
        limits={"max_tools": 20},
    )
    tools = [tool(protocol, f"f{n}") for n in range(20)]
    resp = await proxy.post(PATHS[protocol], json=request(protocol, tools))
    assert resp.status == 200, await resp.text()
    # one more, and the one more has no name: the count is checked first, before any tool
    # is looked at
    resp = await proxy.post(PATHS[protocol], json=request(protocol, [*tools, {"type": "x"}]))
    assert resp.status == 400
    assert "more than 20 tools (limits.max_tools)" in await resp.text()
    assert len(upstream.requests) == 1


async def test_the_functions_of_a_namespace_count_one_by_one(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(await start_upstream(upstream.app))),
        limits={"max_tools": 5},
    )
    inner = [{"type": "function", "name": f"f{n}"} for n in range(5)]
    namespace = {"type": "namespace", "name": "ns", "tools": inner}
    resp = await proxy.post(PATHS["responses"], json=request("responses", [namespace]))
    assert resp.status == 200
    namespace["tools"] = [*inner, {"type": "function", "name": "f5"}]
    resp = await proxy.post(PATHS["responses"], json=request("responses", [namespace]))
    assert resp.status == 400
    assert "limits.max_tools" in await resp.text()


async def test_the_default_max_tools_is_1024(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(await start_upstream(upstream.app)))
    )
    tools = [tool("messages", f"f{n}") for n in range(1025)]
    resp = await proxy.post(PATHS["messages"], json=request("messages", tools))
    assert resp.status == 400
    assert "more than 1024 tools" in await resp.text()
    resp = await proxy.post(PATHS["messages"], json=request("messages", tools[:1024]))
    assert resp.status == 200


@pytest.mark.parametrize("stream", [True, False])
async def test_a_responses_answer_echoes_the_tools_once_in_its_last_response_object(
    stream: bool, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(await start_upstream(upstream.app)))
    )
    tools = [tool("responses", f"f{n}") for n in range(3)]
    resp = await proxy.post(
        PATHS["responses"], json={**request("responses", tools), "stream": stream}
    )
    assert resp.status == 200
    body = await resp.read()
    if not stream:
        assert orjson.loads(body)["tools"] == tools
        return
    checker.check(body)  # still a canonical stream
    events = [payload for _, payload in checker.parse(body)]
    echoed = [(e["type"], e["response"]["tools"]) for e in events if "response" in e]
    assert echoed == [
        ("response.created", []),
        ("response.in_progress", []),
        ("response.completed", tools),
    ]
    assert body.count(b'"name":"f1"') == 1


@pytest.mark.parametrize(("turns", "thread"), [(10, "main"), (40_000, "worker")])
async def test_a_large_request_is_translated_off_the_event_loop(
    turns: int,
    thread: str,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Where the conversion ran shows in the thread of the line it logs for a dropped field:
    # from 1 MiB on, a worker's, so that the event loop goes on serving while it converts.
    caplog.set_level(logging.DEBUG, logger="toolcall_proxy")
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(await start_upstream(upstream.app)))
    )
    body = {
        "model": "m",
        # the turns alternate: consecutive user messages would be merged into one (issue 23)
        "input": [
            {"role": "assistant" if n % 2 else "user", "content": f"turn {n:06}"}
            for n in range(turns)
        ],
        "metadata": {"k": "v"},
    }
    data = orjson.dumps(body)
    assert (len(data) >= OFF_LOOP_BYTES) == (thread == "worker")
    headers = {"Content-Type": "application/json"}
    resp = await proxy.post(PATHS["responses"], data=io.BytesIO(data), headers=headers)
    assert resp.status == 200
    [record] = [r for r in caplog.records if "dropped metadata" in r.getMessage()]
    on_loop = record.threadName == threading.main_thread().name
    assert on_loop == (thread == "main")
    assert len(upstream.bodies[0]["messages"]) == turns


@pytest.mark.parametrize("enabled", [True, False])
def test_a_large_body_is_parsed_without_a_collection_and_the_collector_left_as_it_was(
    enabled: bool,
) -> None:
    body = orjson.dumps({"tools": [{"name": f"f{n}", "input_schema": {}} for n in range(100_000)]})
    collections: list[str] = []

    def note(phase: str, info: dict[str, int]) -> None:
        collections.append(phase)

    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    gc.callbacks.append(note)
    try:
        parsed = parse_json(body)
        assert gc.isenabled() is enabled
    finally:
        gc.callbacks.remove(note)
        (gc.enable if was else gc.disable)()
    assert collections == []  # 200,000 containers: a dozen collections with the collector on
    assert isinstance(parsed, dict)
    assert len(parsed["tools"]) == 100_000
    assert parse_json(b"{not json") is None
