"""Cost per delta does not grow with what came before: neither with how long the call already
is, nor with how many calls the choice already had, nor with how much of a call written as
markup is held (issue 24 item 4).

The suite's one performance-shaped guard, on CPU time and with a wide margin: 16 times the
input must cost less than 40 times the time (linear costs about 16 times; the quadratic
cost this guards against was 70-110 times at these sizes). The long call is the shape that
made it quadratic: old llama.cpp's name and id repeated on every delta, with fragments that
are complete JSON values or start like one (``{}``, ``[``), which ask the checks for a
re-sent copy and for a second call under the same name about the text kept so far."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from tests.support.cpu import least_cpu_seconds
from tests.support.normalizer import counting_ids

GROWTH = 16
BOUND = 40
CODE = ["function", " f", "()", " {}", "\\n", " x", " =", " []", "{", "[", "}", "]", ";"]


def event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"


def one_call(deltas: int) -> bytes:
    """One call writing a file, ``deltas`` fragments of code, the old llama.cpp way."""

    def entry(text: str) -> bytes:
        function = {"name": "write_file", "id": "call_1", "arguments": text}
        return event({"tool_calls": [{"index": 0, "function": function}]})

    body = [entry('{"path": "a.js", "content": "')]
    body += [entry(CODE[i % len(CODE)]) for i in range(deltas)]
    body += [entry('"}'), event({}, "tool_calls")]
    return b"".join(body)


def many_calls(calls: int) -> bytes:
    """``calls`` canonical calls in one choice, one after the other."""
    body = []
    for i in range(calls):
        function = {"name": "get_weather", "arguments": ""}
        body.append(event({"tool_calls": [{"index": i, "id": f"c{i}", "function": function}]}))
        body.append(event({"tool_calls": [{"index": i, "function": {"arguments": '{"q": '}}]}))
        body.append(event({"tool_calls": [{"index": i, "function": {"arguments": f"{i}}}"}}]}))
    body.append(event({}, "tool_calls"))
    return b"".join(body)


# what a held call may grow to here: far past the default cap, so that a cost growing with
# what is held shows before the cap ends the rewrite
HELD_CAP = 1 << 30
LINE = "x" * 500


def held_markup(deltas: int) -> bytes:
    """One hermes call in the content, its arguments' one string ``deltas`` tokens long: held
    whole until its markup closes, every token fed while nothing goes out."""
    opening = '<tool_call>\n{"name": "write_file", "arguments": {"content": "'
    body = [event({"role": "assistant", "content": ""}), event({"content": opening})]
    body += [event({"content": f" {i:06d} {LINE}"}) for i in range(deltas)]
    body += [event({"content": '"}}\n</tool_call>'}), event({}, "stop")]
    return b"".join(body)


def cpu_seconds(
    stream: bytes, *, coalesce: bool, repeat: int, size: int = 1500, markup: bool = False
) -> float:
    """The least CPU time the core took over the stream, in reads of ``size`` bytes
    (``markup``: hermes markup looked for in a request that offered a tool)."""
    reads = [stream[i : i + size] for i in range(0, len(stream), size)]
    request = {"tools": [{"type": "function", "function": {"name": "write_file"}}]}

    def work() -> None:
        options = UpstreamOptions(coalesce=coalesce)
        if markup:
            options = UpstreamOptions(
                coalesce=coalesce, dialects=("hermes",), max_held_bytes=HELD_CAP
            )
        info = RequestInfo.from_body(request if markup else {})
        normalizer = StreamNormalizer(options, info, new_id=counting_ids())
        chat = ChatSSEStream(normalizer)
        for read in reads:
            chat.feed(read)
        chat.close(complete=True)

    return least_cpu_seconds(work, repeat)


@pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])
@pytest.mark.parametrize(
    ("shape", "small"), [(one_call, 2_000), (many_calls, 250)], ids=["one-call", "many-calls"]
)
def test_sixteen_times_the_stream_costs_less_than_forty_times_the_cpu(
    shape: Callable[[int], bytes], small: int, coalesce: bool
) -> None:
    # the small stream is short enough for noise to matter: its best of three
    short = cpu_seconds(shape(small), coalesce=coalesce, repeat=3)
    long = cpu_seconds(shape(small * GROWTH), coalesce=coalesce, repeat=2)
    assert long < BOUND * short, f"{GROWTH}x the stream took {long / short:.0f}x the CPU"


@pytest.mark.parametrize("size", [1500, 1], ids=["1500-byte-reads", "event-reads"])
def test_sixteen_times_a_held_markup_call_costs_less_than_forty_times_the_cpu(size: int) -> None:
    # size 1: one event a read instead (the held-markup hot path's reads)
    def cpu(deltas: int, repeat: int) -> float:
        body = held_markup(deltas)
        if size == 1:
            events = body.split(b"\n\n")[:-1]
            return least_cpu_seconds(lambda: _by_events(events), repeat)
        return cpu_seconds(body, coalesce=False, repeat=repeat, size=size, markup=True)

    short = cpu(1_000, 3)
    long = cpu(1_000 * GROWTH, 2)
    assert long < BOUND * short, f"{GROWTH}x the stream took {long / short:.0f}x the CPU"


def _by_events(events: list[bytes]) -> None:
    options = UpstreamOptions(dialects=("hermes",), max_held_bytes=HELD_CAP)
    request = {"tools": [{"type": "function", "function": {"name": "write_file"}}]}
    normalizer = StreamNormalizer(options, RequestInfo.from_body(request), new_id=counting_ids())
    chat = ChatSSEStream(normalizer)
    for data in events:
        chat.feed(data + b"\n\n")
    chat.close(complete=True)
