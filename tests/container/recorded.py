"""The recorded broken stream the lane sends through the containers, and what must come out.

Old llama.cpp (b5494) put the call's id inside ``function``, left out ``type`` and repeated the
name on every delta; its canonical form is the golden file the proxy's own tests hold. The
request is the one the golden case answers.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

import aiohttp
import openai
from aiohttp import web

from tests.container.podman import ROOT

RECORDING = "llamacpp-b5494-parallel-tool-calls"
UPSTREAM_BODY = (ROOT / "tests/fixtures/upstream" / f"{RECORDING}.sse").read_bytes()
GOLDEN = ROOT / "tests/golden"
CANONICAL_BODY = (GOLDEN / f"fixture-{RECORDING}.out.sse").read_bytes()
[CASE] = [
    case
    for case in json.loads((GOLDEN / "cases.json").read_text())
    if case["name"] == f"fixture-{RECORDING}"
]
REQUEST: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text())[CASE["request"]]


def upstream_events() -> list[bytes]:
    events = [event + b"\n\n" for event in UPSTREAM_BODY.split(b"\n\n") if event.strip()]
    assert b"".join(events) == UPSTREAM_BODY, "the recording is whole SSE events"
    return events


@dataclass(frozen=True, slots=True)
class Hold:
    """Pause the recording before event ``at``: ``reached`` is set there, ``release`` ends it."""

    at: int
    reached: asyncio.Event
    release: asyncio.Event


def recorded_upstream(hold: Hold | None = None) -> web.Application:
    """The recording on POST /v1/chat/completions, GET /v1/models for readiness."""

    async def chat(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for number, event in enumerate(upstream_events()):
            if hold is not None and number == hold.at:
                hold.reached.set()
                await hold.release.wait()
            await response.write(event)
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "tiny"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app


@dataclass(frozen=True, slots=True)
class Call:
    id: str
    name: str
    arguments: object


def expected_calls() -> list[Call]:
    [choice] = CASE["expect"]
    return [Call(c["id"], c["name"], c["arguments"]) for c in choice["calls"]]


async def calls_through_openai(base_url: str, model: str) -> tuple[list[Call], str | None]:
    """The stream read by openai-python, holding each call to the canonical shape: the
    first delta of a call carries its id, type and name; the later ones only arguments."""
    client = openai.AsyncOpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=60)
    opened: dict[int, dict[str, Any]] = {}
    finish: str | None = None
    try:
        stream = await client.chat.completions.create(**{**REQUEST, "model": model})
        async for chunk in stream:
            for choice in chunk.choices:
                finish = choice.finish_reason or finish
                for delta in choice.delta.tool_calls or []:
                    function = delta.function
                    assert function is not None
                    if delta.index not in opened:
                        assert delta.type == "function", delta
                        assert delta.id, delta
                        assert function.name, delta
                        assert function.arguments == "", delta
                        opened[delta.index] = {"id": delta.id, "name": function.name, "args": ""}
                    else:
                        assert (delta.id, delta.type, function.name) == (None, None, None), delta
                        opened[delta.index]["args"] += function.arguments or ""
    finally:
        await client.close()
    calls = [Call(c["id"], c["name"], json.loads(c["args"])) for _, c in sorted(opened.items())]
    return calls, finish


async def raw_body(base_url: str, model: str) -> bytes:
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session,
        session.post(f"{base_url}/chat/completions", json={**REQUEST, "model": model}) as response,
    ):
        assert response.status == 200, await response.text()
        return await response.read()
