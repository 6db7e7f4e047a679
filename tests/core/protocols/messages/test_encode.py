"""The Messages encoder fed neutral events directly: the shapes chat streams can take that the
golden cases do not all show (interleaved calls, text inside a call, reasoning, stop sequences,
errors, a cut)."""

from __future__ import annotations

import itertools

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
from proxy.core.protocols.messages.encode import MessagesEncoder
from proxy.core.protocols.messages.request import MessagesContext
from tests.core.protocols.messages.checker import check


def encode(
    events: list[StreamEvent], context: MessagesContext | None = None, *, stream: bool = True
) -> tuple[bytes, MessagesEncoder]:
    counter = itertools.count(1)
    encoder = MessagesEncoder(
        context or MessagesContext("claude-x"), lambda: f"id{next(counter)}", stream=stream
    )
    return b"".join(b for event in events for b in encoder.feed(event)), encoder


def test_interleaved_calls_come_out_one_block_after_another():
    out, _ = encode(
        [
            Started(id="chatcmpl-1", model="qwen"),
            CallOpened(0, "a", "f"),
            ArgumentsDelta(0, '{"x": '),
            CallOpened(1, "b", "g"),
            ArgumentsDelta(1, '{"y": 2}'),
            ArgumentsDelta(0, "1}"),
            CallClosed(0),
            CallClosed(1),
            Finished(FinishReason.TOOL_CALLS),
            Usage(10, 5),
            Ended(True),
        ]
    )
    result = check(out)
    assert [(b["id"], b["input"]) for b in result.tool_uses] == [("a", {"x": 1}), ("b", {"y": 2})]
    assert result.message["stop_reason"] == "tool_use"
    assert result.message["usage"] == {"input_tokens": 10, "output_tokens": 5}
    assert result.message["id"] == "msg_id1"
    assert result.message["model"] == "claude-x"


def test_a_call_whose_arguments_are_whole_does_not_wait_for_the_finish():
    encoder = MessagesEncoder(MessagesContext("m"), lambda: "x")
    events: list[StreamEvent] = [Started(), CallOpened(0, "a", "f"), ArgumentsDelta(0, '{"x": 1}')]
    for event in events:
        encoder.feed(event)
    out = b"".join(encoder.feed(CallOpened(1, "b", "g")) + encoder.feed(ArgumentsDelta(1, "{")))
    assert b'"content_block_stop","index":0' in out
    assert b'"partial_json":"{"' in out


def test_text_that_comes_while_a_call_is_open_waits_for_it():
    out, _ = encode(
        [
            Started(),
            TextDelta("before "),
            CallOpened(0, "a", "f"),
            ArgumentsDelta(0, '{"x"'),
            TextDelta("during"),
            ArgumentsDelta(0, ": 1}"),
            CallClosed(0),
            Finished(FinishReason.TOOL_CALLS),
            Ended(True),
        ]
    )
    result = check(out)
    assert [b["type"] for b in result.blocks] == ["text", "tool_use", "text"]
    assert result.text == "before during"
    assert result.tool_uses[0]["input"] == {"x": 1}


def test_reasoning_becomes_a_thinking_block_before_the_text():
    out, encoder = encode(
        [
            Started(),
            ReasoningDelta("hm"),
            ReasoningDelta("m"),
            TextDelta("hi"),
            Finished(FinishReason.STOP),
            Ended(True),
        ],
        stream=False,  # the whole Message is asked for below (its events are the same)
    )
    result = check(out)
    assert result.blocks == [
        {"type": "thinking", "thinking": "hmm", "signature": ""},
        {"type": "text", "text": "hi"},
    ]
    assert encoder.response()["content"] == result.blocks
    assert result.message["stop_reason"] == "end_turn"


def test_stop_sequence_only_when_the_upstream_named_a_requested_one():
    context = MessagesContext("m", stop_sequences=("END",))
    named, _ = encode(
        [Started(), TextDelta("a"), Finished(FinishReason.STOP, "END"), Ended(True)], context
    )
    other, _ = encode(
        [Started(), TextDelta("a"), Finished(FinishReason.STOP, "STOP"), Ended(True)], context
    )
    assert check(named).message["stop_reason"] == "stop_sequence"
    assert check(named).message["stop_sequence"] == "END"
    assert check(other).message["stop_reason"] == "end_turn"


def test_finish_reasons_map_to_stop_reasons():
    for reason, expected in [
        (FinishReason.LENGTH, "max_tokens"),
        (FinishReason.CONTENT_FILTER, "refusal"),
        (FinishReason.STOP, "end_turn"),
    ]:
        out, _ = encode([Started(), TextDelta("a"), Finished(reason), Ended(True)])
        assert check(out).message["stop_reason"] == expected


def test_a_cut_call_ends_at_max_tokens():
    out, _ = encode(
        [
            Started(),
            CallOpened(0, "a", "f"),
            ArgumentsDelta(0, '{"x": "ab'),
            CallClosed(0, complete=False),
            Finished(FinishReason.LENGTH),
            Ended(True),
        ]
    )
    result = check(out)
    assert result.message["stop_reason"] == "max_tokens"
    assert result.tool_uses[0]["input_unparsed"] == '{"x": "ab'


def test_an_upstream_error_is_an_anthropic_error_event_and_ends_the_stream():
    out, _encoder = encode(
        [Started(), TextDelta("a"), Failed("boom", "server_error"), TextDelta("b"), Ended(True)]
    )
    result = check(out)
    assert result.error == {"type": "api_error", "message": "boom"}
    assert out.endswith(
        b'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"boom"}}\n\n'
    )
    assert b'"b"' not in out


def test_a_cut_stream_gets_nothing_more():
    encoder = MessagesEncoder(MessagesContext("m"), lambda: "x")
    encoder.feed(Started())
    encoder.feed(CallOpened(0, "a", "f"))
    assert encoder.feed(Ended(False)) == []
    assert encoder.feed(Finished(FinishReason.STOP)) == []


def test_every_event_has_its_event_line():
    out, _ = encode([Started(), TextDelta("a"), Finished(FinishReason.STOP), Ended(True)])
    events = out.split(b"\n\n")[:-1]
    assert all(event.startswith(b"event: ") for event in events)
    assert len(events) == 6


def test_a_streaming_encoder_keeps_no_text_it_never_repeats():
    # issue 26 item 11: a stream's text went into a whole Message nobody asked for
    events: list[StreamEvent] = [Started(), *(TextDelta("x" * 100) for _ in range(100))]
    events.append(CallOpened(0, "a", "f"))
    events += [ArgumentsDelta(0, '{"x": 1}'), CallClosed(0), Finished(FinishReason.TOOL_CALLS)]
    streamed, stream = encode([*events, Ended(True)])
    whole, kept_whole = encode([*events, Ended(True)], stream=False)
    assert streamed == whole
    assert stream.kept == len('{"x": 1}')  # the tool input, for the stop reason
    assert kept_whole.kept == 100 * 100 + len('{"x": 1}')
    assert check(streamed).message["stop_reason"] == "tool_use"
