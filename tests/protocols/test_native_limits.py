"""The limits of a native stream, through the running proxy: the upstream's configured
``limits`` reach both native repairers (issue 26 item 2)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.streams import serve_writes

REQUESTS: dict[str, dict[str, Any]] = {
    "responses": {"model": "m", "stream": True, "input": "hi"},
    "messages": {
        "model": "m",
        "max_tokens": 10,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    },
}


def data_event(payload: dict[str, Any], *, named: bool = True) -> bytes:
    head = b"event: " + payload["type"].encode() + b"\n" if named else b""
    return head + b"data: " + orjson.dumps(payload) + b"\n\n"


def responses_text(*deltas: str, named: bool = True) -> list[bytes]:
    """A Responses stream of one message whose deltas are ``deltas``; ``named``: each event
    with its ``event:`` line (without, every event is a repair)."""
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m"}
    item = {"id": "msg_1", "type": "message", "role": "assistant"}
    part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
    at = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    payloads: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "status": "in_progress"}},
        {"type": "response.in_progress", "response": {**response, "status": "in_progress"}},
        {
            "type": "response.output_item.added",
            "output_index": 0,
            "item": {**item, "status": "in_progress", "content": []},
        },
        {"type": "response.content_part.added", **at, "part": part},
        *({"type": "response.output_text.delta", **at, "delta": d, "logprobs": []} for d in deltas),
    ]
    text = "".join(deltas)
    done_part = {**part, "text": text}
    done_item = {**item, "status": "completed", "content": [done_part]}
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    payloads += [
        {"type": "response.output_text.done", **at, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **at, "part": done_part},
        {"type": "response.output_item.done", "output_index": 0, "item": done_item},
        {
            "type": "response.completed",
            "response": {**response, "status": "completed", "output": [done_item], "usage": usage},
        },
    ]
    for n, payload in enumerate(payloads):
        payload["sequence_number"] = n
    return [data_event(p, named=named) for p in payloads]


def messages_text(*deltas: str, named: bool = True) -> list[bytes]:
    """A Messages stream of one text block whose deltas are ``deltas``."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    }
    payloads: list[dict[str, Any]] = [
        {"type": "message_start", "message": message},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": d}}
            for d in deltas
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return [data_event(p, named=named) for p in payloads]


TEXT_STREAMS = {"responses": responses_text, "messages": messages_text}


async def native_proxy(
    protocol: str,
    writes: list[bytes],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    **settings: Any,
) -> bytes:
    """What a client of ``protocol`` receives through the proxy, in native mode, for an upstream
    that sends ``writes``."""
    upstream = await start_upstream(serve_writes(writes))
    modes = {protocol: "native"}
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), **modes),
        **settings,
    )
    resp = await proxy.post(f"/v1/{protocol}", json=REQUESTS[protocol])
    assert resp.status == 200
    return await resp.read()


@pytest.mark.parametrize("protocol", ["responses", "messages"])
async def test_the_configured_max_event_bytes_reaches_the_native_repairer(
    protocol: str, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    # without event: lines every event is repaired (given one), unless it goes out raw; the
    # long delta is under the default limit (1 MiB) and over the one configured here
    writes = TEXT_STREAMS[protocol]("Hi. ", "x" * (100 << 10), named=False)
    out = await native_proxy(
        protocol, writes, start_upstream, start_proxy, limits={"max_event_bytes": 64 << 10}
    )
    big = writes.index(next(w for w in writes if len(w) > 100 << 10))
    assert out.startswith(b"event: ")  # repaired: rewriting was on
    assert b"".join(writes[big:]) in out  # from the long event on, raw
