"""The translate pipeline's chat half: every single-choice golden stream, repaired by the chat
normalizer and decoded into neutral events, says what a chat client reconstructs from the
repaired chunks (the case's ``expect``), whole, byte at a time and at random cuts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.core.bridge import GAVE_UP, ChatBridge
from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Failed,
    Finished,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.decode import completion_events
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from tests.support.normalizer import bytewise, counting_ids, random_cuts
from tests.support.recorder import Recorder

GOLDEN = Path(__file__).parent.parent / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8"))
SINGLE = [c for c in CASES if len(c["expect"]) == 1]


def translate(
    case: dict[str, Any], reads: list[bytes], options: UpstreamOptions | None = None
) -> tuple[list[StreamEvent], list[bytes]]:
    normalizer = StreamNormalizer(
        options or UpstreamOptions(dialects=tuple(case.get("dialects", ()))),
        RequestInfo.from_body(REQUESTS[case["request"]]),
        new_id=counting_ids(),
    )
    recorder = Recorder()
    bridge = ChatBridge(ChatSSEStream(normalizer), recorder)
    out = [b for read in reads for b in bridge.feed(read)]
    out += bridge.close(complete=case["complete"])
    return recorder.events, out


def reconstruct(events: list[StreamEvent]) -> dict[str, Any]:
    """What the events say, in the shape of a golden case's ``expect`` entry."""
    assert isinstance(events[0], Started)
    assert isinstance(events[-1], Ended)
    assert sum(isinstance(e, (Started, Ended)) for e in events) == 2
    calls: dict[int, dict[str, Any]] = {}
    closed: set[int] = set()
    text, finish = "", None
    for event in events:
        match event:
            case TextDelta(text=delta):
                text += delta
            case CallOpened(index=i, id=ident, name=name):
                assert i == len(calls), "call indexes are dense, in opening order"
                calls[i] = {"name": name, "id": ident, "text": ""}
            case ArgumentsDelta(index=i, text=delta):
                assert i in calls
                assert i not in closed
                calls[i]["text"] += delta
            case CallClosed(index=i):
                assert i in calls
                assert i not in closed
                closed.add(i)
            case Finished(reason=reason):
                assert finish is None
                assert closed == set(calls), "every call closes before the finish"
                finish = reason.value
            case _:
                pass
    return {"content": text, "calls": calls, "finish_reason": finish}


def assert_matches(case: dict[str, Any], events: list[StreamEvent]) -> None:
    expect = case["expect"][0]
    got = reconstruct(events)
    assert got["content"] == expect["content"]
    assert got["finish_reason"] == expect["finish_reason"]
    assert len(got["calls"]) == len(expect["calls"])
    for call, want in zip(got["calls"].values(), expect["calls"], strict=True):
        assert call["name"] == want["name"]
        if want["id"] is not None:
            assert call["id"] == want["id"]
        else:
            assert call["id"]
        if "arguments" in want:
            assert json.loads(call["text"] or "{}") == want["arguments"]
        else:
            assert call["text"] == want["arguments_text"]


single = pytest.mark.parametrize("case", SINGLE, ids=[c["name"] for c in SINGLE])


@single
def test_golden_stream_decodes_to_what_a_client_reconstructs(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    events, _ = translate(case, [body])
    if not case["complete"]:
        assert events[-1] == Ended(False)
        return
    assert_matches(case, events)


@single
def test_golden_stream_decodes_the_same_however_it_is_cut(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    whole, _ = translate(case, [body])
    assert translate(case, bytewise(body))[0] == whole
    for reads in random_cuts(body, case["name"], count=3):
        assert translate(case, reads)[0] == whole


def test_bridge_writes_what_the_encoder_makes_in_order():
    case = next(c for c in SINGLE if c["name"] == "fixture-llamacpp-b9821-one-tool-call")
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    events, out = translate(case, [body])
    assert out == [type(e).__name__.encode() for e in events]


def test_a_stream_that_outgrows_the_cap_fails_instead_of_leaking_chat_bytes():
    # A call whose name never comes is held; past the cap the chat path would forward the
    # upstream's bytes raw, which a client of another protocol cannot read.
    case = {"request": "weather", "complete": True}
    arguments = '{"location": "' + "x" * 4000 + '"}'
    chunk = {
        "object": "chat.completion.chunk",
        "choices": [
            {
                "index": 0,
                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": arguments}}]},
            }
        ],
    }
    body = b"data: " + json.dumps(chunk).encode() + b"\n\n" + b"data: [DONE]\n\n"
    events, out = translate(case, [body], UpstreamOptions(max_held_bytes=1024))
    failures = [e for e in events if isinstance(e, Failed)]
    assert failures == [Failed(GAVE_UP, "proxy_error")]
    assert not any(b"chat.completion.chunk" in data for data in out)
    assert isinstance(events[-1], Failed), "nothing is encoded after the failure"


def test_usage_after_the_finish_becomes_a_usage_event():
    case = next(c for c in SINGLE if c["name"] == "fixture-llamacpp-b9821-one-tool-call")
    chunks = [
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": "hi"}, "finish_reason": None}
            ],
        },
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        },
        {
            "id": "x",
            "object": "chat.completion.chunk",
            "model": "m",
            "choices": [],
            "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
        },
    ]
    body = (
        b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
    )
    events, _ = translate(case, [body])
    usage = [e for e in events if isinstance(e, Usage)]
    assert [(u.input_tokens, u.output_tokens) for u in usage] == [(7, 2)]
    assert events[0] == Started("x", "m", None)


def test_a_whole_completion_gives_the_events_of_its_stream():
    body = json.dumps(
        {
            "id": "c1",
            "object": "chat.completion",
            "model": "m",
            "created": 5,
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "a",
                                "type": "function",
                                "function": {"name": "f", "arguments": "{}"},
                            },
                            {
                                "id": "b",
                                "type": "function",
                                "function": {"name": "g", "arguments": '{"x":1}'},
                            },
                        ],
                    },
                }
            ],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4},
        }
    ).encode()
    events = completion_events(body)
    assert events is not None
    got = reconstruct(events)
    assert [(c["id"], c["name"], c["text"]) for c in got["calls"].values()] == [
        ("a", "f", "{}"),
        ("b", "g", '{"x":1}'),
    ]
    assert got["finish_reason"] == "tool_calls"
    assert completion_events(b"not json") is None
