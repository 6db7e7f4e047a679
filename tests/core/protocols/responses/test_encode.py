"""The Responses encoder fed neutral events: the canonical stream, item order, holding, the end."""

from __future__ import annotations

import itertools
import json
import tracemalloc
from collections.abc import Callable

import pytest

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Failed,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.protocols.responses import items
from proxy.core.protocols.responses.context import ResponsesContext, ToolKind, ToolRef
from proxy.core.protocols.responses.encode import ResponsesEncoder
from tests.core.protocols.responses.checker import check


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"id{next(counter):04d}"


def encode(events: list[StreamEvent], context: ResponsesContext | None = None) -> bytes:
    encoder = ResponsesEncoder(context or ResponsesContext(model="client-model"), ids())
    return b"".join(b for event in events for b in encoder.feed(event))


def call(index: int, ident: str, name: str, *args: str) -> list[StreamEvent]:
    return [
        CallOpened(index, ident, name),
        *(ArgumentsDelta(index, a) for a in args),
        CallClosed(index),
    ]


START = Started(id="chatcmpl-1", model="upstream-model", created=1700000000)
END: list[StreamEvent] = [Usage(7, 5), Ended(complete=True)]


def test_text_only_is_the_canonical_message_sequence():
    body = encode([START, TextDelta("Hel"), TextDelta("lo"), Finished(FinishReason.STOP), *END])
    checked = check(body)
    assert [p["type"] for p in checked.events] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
        "response.output_text.delta",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert body.startswith(b"event: response.created\ndata: {")
    assert checked.text == "Hello"
    response = checked.response
    assert response is not None
    assert response["id"] == "resp_id0001"
    assert response["model"] == "client-model"
    assert response["created_at"] == 1700000000
    assert response["usage"]["input_tokens"] == 7
    assert response["usage"]["total_tokens"] == 12
    assert checked.items[0]["id"] == "msg_id0002"
    assert all(
        p["logprobs"] == [] for p in checked.events if p["type"] == "response.output_text.delta"
    )


def test_reasoning_is_an_item_before_the_message():
    body = encode(
        [START, ReasoningDelta("think"), TextDelta("answer"), Finished(FinishReason.STOP), *END]
    )
    checked = check(body)
    assert [i["type"] for i in checked.items] == ["reasoning", "message"]
    assert checked.reasoning == "think"
    assert checked.items[0]["id"].startswith("rs_")


def test_interleaved_calls_come_out_one_after_the_other():
    events: list[StreamEvent] = [
        START,
        CallOpened(0, "call_a", "get_weather"),
        ArgumentsDelta(0, '{"city"'),
        CallOpened(1, "call_b", "get_time"),
        ArgumentsDelta(1, '{"tz":'),
        ArgumentsDelta(0, ': "Paris"}'),
        ArgumentsDelta(1, ' "CET"}'),
        CallClosed(0),
        CallClosed(1),
        Finished(FinishReason.TOOL_CALLS),
        *END,
    ]
    encoder = ResponsesEncoder(ResponsesContext(), ids())
    sent = [encoder.feed(event) for event in events]
    body = b"".join(b for out in sent for b in out)
    checked = check(body)
    assert [(c["call_id"], c["name"], json.loads(c["arguments"])) for c in checked.calls] == [
        ("call_a", "get_weather", {"city": "Paris"}),
        ("call_b", "get_time", {"tz": "CET"}),
    ]
    # the first call's argument delta went out as it came; the second call was held
    assert b"function_call_arguments.delta" in b"".join(sent[2])
    assert sent[4] == []
    assert all(c["status"] == "completed" for c in checked.calls)


def test_text_while_a_call_streams_becomes_a_message_after_it():
    body = encode(
        [
            START,
            *call(0, "c1", "f", "{}")[:2],
            TextDelta("later"),
            CallClosed(0),
            Finished(FinishReason.TOOL_CALLS),
            *END,
        ]
    )
    checked = check(body)
    assert [i["type"] for i in checked.items] == ["function_call", "message"]


def test_length_cuts_the_last_call_as_incomplete():
    body = encode(
        [
            START,
            CallOpened(0, "c1", "f"),
            ArgumentsDelta(0, '{"a": "tru'),
            CallClosed(0),
            Finished(FinishReason.LENGTH),
            *END,
        ]
    )
    checked = check(body)
    assert checked.events[-1]["type"] == "response.incomplete"
    assert checked.response is not None
    assert checked.response["incomplete_details"] == {"reason": "max_output_tokens"}
    assert checked.calls[0]["status"] == "incomplete"


def test_a_call_closed_as_cut_is_incomplete_whatever_the_finish():
    body = encode(
        [
            START,
            CallOpened(0, "c1", "f"),
            ArgumentsDelta(0, "{}"),
            CallClosed(0, complete=False),
            Finished(FinishReason.TOOL_CALLS),
            *END,
        ]
    )
    assert check(body).calls[0]["status"] == "incomplete"


def test_content_filter_is_incomplete_with_its_reason():
    body = encode([START, TextDelta("x"), Finished(FinishReason.CONTENT_FILTER), *END])
    checked = check(body)
    assert checked.response is not None
    assert checked.response["incomplete_details"] == {"reason": "content_filter"}
    assert checked.items[0]["status"] == "incomplete"


def test_an_error_ends_with_response_failed():
    body = encode(
        [
            START,
            TextDelta("par"),
            Failed("upstream broke", code="server_error"),
            Ended(complete=True),
        ]
    )
    checked = check(body)
    assert checked.events[-1]["type"] == "response.failed"
    assert checked.response is not None
    assert checked.response["error"] == {"code": "server_error", "message": "upstream broke"}


def test_a_cut_stream_gets_no_terminal_event():
    encoder = ResponsesEncoder(ResponsesContext(), ids())
    events: list[StreamEvent] = [START, TextDelta("par"), CallOpened(0, "c", "f")]
    out = [b for e in events for b in encoder.feed(e)]
    assert encoder.feed(Ended(complete=False)) == []
    assert encoder.feed(Usage(1, 1)) == []
    check(b"".join(out), complete=False)
    assert b"response.completed" not in b"".join(out)


def test_custom_and_namespace_tools_get_their_client_names_back():
    context = ResponsesContext(
        tools={
            "apply_patch": ToolRef(ToolKind.CUSTOM, "apply_patch"),
            "multi_agent_v1__spawn": ToolRef(ToolKind.FUNCTION, "spawn", "multi_agent_v1"),
        }
    )
    body = encode(
        [
            START,
            *call(0, "c1", "apply_patch", '{"input": "*** Begin', ' Patch"}'),
            *call(1, "c2", "multi_agent_v1__spawn", "{}"),
            Finished(FinishReason.TOOL_CALLS),
            *END,
        ],
        context,
    )
    checked = check(body)
    custom, spawn = checked.calls
    assert custom["type"] == "custom_tool_call"
    assert custom["input"] == "*** Begin Patch"
    assert custom["id"].startswith("ctc_")
    assert (spawn["name"], spawn["namespace"]) == ("spawn", "multi_agent_v1")


def test_missing_usage_gives_zeros():
    body = encode([START, TextDelta("x"), Finished(FinishReason.STOP), Ended(complete=True)])
    response = check(body).response
    assert response is not None
    assert response["usage"]["input_tokens"] == response["usage"]["output_tokens"] == 0


@pytest.mark.parametrize("finish", [FinishReason.STOP, FinishReason.LENGTH])
def test_the_non_streamed_response_is_the_final_one(finish: FinishReason):
    events = [START, TextDelta("x"), *call(0, "c1", "f", "{}"), Finished(finish), *END]
    streamed = check(encode(events)).response
    encoder = ResponsesEncoder(ResponsesContext(model="client-model"), ids(), stream=False)
    assert [b for e in events for b in encoder.feed(e)] == []
    assert encoder.response() == streamed


def _long_text_response(deltas: int, text_at: int) -> tuple[list[bytes], int]:
    """A response of one long text (``deltas`` pieces of 4 characters, each a string of its
    own as a parsed delta's is) and a call: the bytes from the text's end on, and the most
    memory the encoder held while the text streamed (orjson's output buffers are as large as
    its worst case, and their untouched pages cost nothing, so the end is not weighed)."""
    encoder = ResponsesEncoder(ResponsesContext(model="m"), ids())
    tracemalloc.start()
    try:
        encoder.feed(Started())
        for i in range(deltas):
            encoder.feed(TextDelta(f"{i % 10_000:04d}") if i != text_at else TextDelta('"é'))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    ending: list[StreamEvent] = [
        CallOpened(0, "c", "f"),  # the text's item ends here
        ArgumentsDelta(0, "{}"),
        CallClosed(0),
        Finished(FinishReason.TOOL_CALLS),
        Ended(complete=True),
    ]
    end = [data for event in ending for data in encoder.feed(event)]
    return end, peak


def test_a_long_text_is_kept_once_however_many_events_repeat_it():
    # issue 26 item 11: 50 MB of text became 262 MB to the client and +520 MB of memory, the
    # text kept in as many objects as deltas and written again into every event repeating it
    deltas = 100_000
    end, peak = _long_text_response(deltas, text_at=5)
    size = 4 * deltas
    # output_text.done, content_part.done, output_item.done, response.completed: one text
    shared = [piece for piece in end if len(piece) >= size]
    assert len(shared) == 4
    assert len({id(piece) for piece in shared}) == 1
    assert peak < 2 * size, f"the encoder held {peak / size:.1f} times the text"


def test_a_long_text_shared_by_its_events_is_written_as_the_events_would_be_alone(monkeypatch):
    end, _ = _long_text_response(20_000, text_at=7)
    monkeypatch.setattr(items, "SHARE_MIN", 1 << 40)  # nothing shared
    alone, _ = _long_text_response(20_000, text_at=7)
    assert b"".join(end) == b"".join(alone)
    assert len(end) > len(alone)


def test_a_call_after_a_finish_is_streamed_whole_not_cut():
    # issue 24 item 1: Kimi and GLM send a finish before their last call; before the fix
    # the second call went out with arguments "" and status incomplete
    body = encode(
        [
            START,
            *call(0, "call_a", "add", '{"a": 1, "b": 2}'),
            Finished(FinishReason.TOOL_CALLS),
            *call(1, "call_b", "add", '{"a": 2, ', '"b": 3}'),
            Finished(FinishReason.TOOL_CALLS),
            *END,
        ]
    )
    checked = check(body)
    assert checked.response is not None
    assert checked.response["status"] == "completed"
    assert [json.loads(c["arguments"]) for c in checked.calls] == [
        {"a": 1, "b": 2},
        {"a": 2, "b": 3},
    ]
    assert [c["status"] for c in checked.calls] == ["completed", "completed"]
