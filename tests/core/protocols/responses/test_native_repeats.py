"""Issue 16's gap 4 in native Responses: the same function_call item twice in a row (Gemma 4
on llama.cpp, llama.cpp#21882). Always counted (``call-duplicated``) and otherwise untouched;
under ``dedupe_calls`` the second is held until its arguments end, then dropped: its events
are gone, the later items' ``output_index`` and every later ``sequence_number`` close up, and
the terminal ``output`` lists it no more. Whole, a byte at a time and at random cuts."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from aiohttp import web

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    Started,
    TextDelta,
    Usage,
)
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses import PROTOCOL
from proxy.core.protocols.responses.native import NativeStream
from proxy.core.protocols.responses.native_request import NativeRequest
from proxy.core.repairs import Repair
from proxy.settings import UpstreamSettings
from tests.conftest import upstream_url
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check
from tests.core.protocols.responses.test_native import WEATHER_TOOLS, summary
from tests.support.cpu import least_cpu_seconds
from tests.support.normalizer import bytewise, random_cuts

START = Started(id="chatcmpl-x", model="m", created=1)


def _call(index: int, ident: str, name: str, *args: str) -> list[Any]:
    return [
        CallOpened(index, ident, name),
        *(ArgumentsDelta(index, a) for a in args),
        CallClosed(index),
    ]


def stream(*, repeat: bool, second: str = '{ "location" :', rest: str = ' "Paris" }') -> v.Payloads:
    """Text, get_weather, (the same call again: another id, its arguments as other JSON),
    get_time."""
    events = [
        START,
        TextDelta("Let me check."),
        *_call(0, "call_w", "get_weather", '{"location"', ': "Paris"}'),
        *(_call(1, "call_again", "get_weather", second, rest) if repeat else []),
        *_call(2 if repeat else 1, "call_t", "get_time", '{"tz": ', '"CET"}'),
        Finished(FinishReason.TOOL_CALLS),
        Usage(3, 4),
        Ended(complete=True),
    ]
    return v.encoded(events)


def run(
    pieces: Sequence[bytes], *, dedupe: bool, complete: bool = True
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    native = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(WEATHER_TOOLS),
        options=UpstreamOptions(dialects=("auto",), dedupe_calls=dedupe),
    )
    out = [b for piece in pieces for b in native.feed(piece)]
    out += native.close(complete=complete)
    return b"".join(out), native.repairs


def every_cutting(body: bytes, *, dedupe: bool) -> tuple[bytes, Counter[str]]:
    whole, repairs = run([body], dedupe=dedupe)
    for pieces in [bytewise(body), *random_cuts(body, seed=body[:64].hex())]:
        assert run(pieces, dedupe=dedupe) == (whole, repairs)
    return whole, repairs


VARIANTS: dict[str, Callable[[v.Payloads], v.Payloads]] = {
    "canonical": lambda payloads: payloads,
    "llamacpp": v.llamacpp,
    "args-only-in-done": v.args_only_in_done,
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_repeated_call_is_counted_and_left_alone_by_default(variant: str):
    body = v.sse(VARIANTS[variant](stream(repeat=True)))
    out, repairs = every_cutting(body, dedupe=False)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    if variant == "canonical":
        assert (out, repairs) == (body, {Repair.CALL_DUPLICATED: 1})
    assert [c["call_id"] for c in check(out).calls] == ["call_w", "call_again", "call_t"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dedupe_calls_drops_the_repeat_and_closes_up_the_later_items(variant: str):
    body = v.sse(VARIANTS[variant](stream(repeat=True)))
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    assert Repair.OUTPUT_INCOMPLETE not in repairs  # the terminal output loses the repeat too
    checked = check(out)  # strict: sequence_number and output_index dense, output as streamed
    assert summary(checked) == summary(check(v.sse(stream(repeat=False))))
    assert [i["type"] for i in checked.items] == ["message", "function_call", "function_call"]
    if variant == "canonical":
        without, _ = run([v.sse(stream(repeat=False))], dedupe=True)
        assert b"call_again" not in out
        assert len(out.splitlines()) == len(without.splitlines())


def test_calls_of_one_name_with_other_arguments_are_held_and_come_out_byte_identical():
    body = v.sse(stream(repeat=True, rest=' "Rome" }'))
    assert every_cutting(body, dedupe=True) == (body, Counter())


def test_a_held_call_cut_short_goes_out_as_it_came_without_an_end():
    body = v.sse(stream(repeat=True))
    done = body.index(b"response.function_call_arguments.done", body.index(b"call_again"))
    head = body[: body.rindex(b"event: ", 0, body.rindex(b"event: ", 0, done))]  # mid-arguments
    out, repairs = run([head], dedupe=True, complete=False)
    assert out == head
    assert not repairs


def test_the_protocol_entry_point_passes_dedupe_calls_on():
    body = v.sse(stream(repeat=True))
    for dedupe, calls in ((False, 3), (True, 2)):
        options = UpstreamOptions(dedupe_calls=dedupe)
        native = PROTOCOL.native(new_id=lambda: "x", request=WEATHER_TOOLS, options=options)
        out = b"".join(native.feed(body) + native.close(complete=True))
        assert len(check(out).calls) == calls


@pytest.mark.parametrize("dedupe", [False, True])
async def test_dedupe_calls_drops_a_repeated_item_through_the_proxy(
    start_upstream, start_proxy, dedupe: bool
):
    body = v.sse(stream(repeat=True))

    async def responses(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(body=body, content_type="text/event-stream")

    app = web.Application()
    app.router.add_post("/v1/responses", responses)
    server = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(
            name="n", url=upstream_url(server), responses="native", dedupe_calls=dedupe
        )
    )
    response = await proxy.post(
        "/v1/responses", json={**WEATHER_TOOLS, "input": "hi", "stream": True}
    )
    assert response.status == 200
    out = await response.read()
    calls = [c["call_id"] for c in check(out).calls]
    assert calls == (["call_w", "call_t"] if dedupe else ["call_w", "call_again", "call_t"])
    if not dedupe:
        assert out == body


def test_a_repeated_markup_call_in_text_is_dropped_under_dedupe_calls():
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>'
    text = "Let me check. " + call + call.replace('": ', '":') + " Done."
    pieces = [text[i : i + 7] for i in range(0, len(text), 7)]
    body = v.sse(
        v.encoded(
            [
                START,
                *(TextDelta(p) for p in pieces),
                Finished(FinishReason.STOP),
                Usage(1, 2),
                Ended(complete=True),
            ]
        )
    )
    kept, kept_repairs = every_cutting(body, dedupe=False)
    assert kept_repairs[Repair.CALL_DUPLICATED] == 1
    assert [i["type"] for i in check(kept).items] == [
        "message",
        "function_call",
        "function_call",
        "message",
    ]
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    checked = check(out)
    assert [i["type"] for i in checked.items] == ["message", "function_call", "message"]
    assert [c["arguments"] for c in checked.calls] == ['{"location": "Paris"}']
    assert checked.text == "Let me check.  Done."


def test_a_held_call_costs_the_same_per_event_however_long_it_is():
    def body(deltas: int) -> bytes:
        long = ['{"location": "', *(["ab"] * deltas), '"}']
        events = [
            START,
            *_call(0, "call_w", "get_weather", '{"location": "Paris"}'),
            *_call(1, "call_again", "get_weather", *long),
            Finished(FinishReason.TOOL_CALLS),
            Ended(complete=True),
        ]
        return v.sse(v.encoded(events))

    def cpu(data: bytes, repeat: int) -> float:
        reads = [data[i : i + 1500] for i in range(0, len(data), 1500)]
        return least_cpu_seconds(lambda: run(reads, dedupe=True), repeat)

    short = cpu(body(1_000), 3)
    long = cpu(body(16_000), 2)
    assert long < 40 * short, f"16x the input took {long / short:.0f}x the CPU"
