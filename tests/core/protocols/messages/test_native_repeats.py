"""Issue 16's gap 4 in native mode: the same tool_use block twice in a row (Gemma 4 on
llama.cpp, llama.cpp#21882). Always counted (``call-duplicated``) and otherwise untouched;
under ``dedupe_calls`` the second is held until its input ends, then dropped, and the blocks
after it close up. Each case runs whole, a byte at a time and at random cuts."""

from __future__ import annotations

import copy
import json

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages import PROTOCOL
from proxy.core.repairs import Repair
from proxy.settings import UpstreamSettings
from tests.conftest import upstream_url
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import check, events_of
from tests.core.protocols.messages.native_helpers import TOOLS_REQUEST, every_cut, repair
from tests.core.protocols.messages.upstreams import Recording, messages_upstream
from tests.support.cpu import least_cpu_seconds

PARALLEL = "anthropic-haiku35-parallel-three-tools"  # three make_directory calls, inputs differ


def payloads(data: bytes) -> list[object]:
    return [json.loads(event.data) for event in events_of(data)]  # type: ignore[arg-type]


def call_twice(events: streams.Events) -> streams.Events:
    """The first tool block sent again right after itself: a new id, the same input as other
    JSON (keys reordered, spaced, cut elsewhere); the blocks after it move up one index."""
    first = streams.tool_indexes(events)[0]
    out: streams.Events = []
    for event in copy.deepcopy(events):
        if event.get("index", -1) > first:
            event["index"] += 1
        out.append(event)
        if event["type"] == "content_block_stop" and event["index"] == first:
            start = next(
                e for e in events if e["type"] == "content_block_start" and e["index"] == first
            )
            value = json.loads(
                "".join(
                    e["delta"]["partial_json"]
                    for e in events
                    if e["type"] == "content_block_delta" and e["index"] == first
                )
            )
            text = json.dumps(dict(reversed(value.items())), indent=1)
            block = {**start["content_block"], "id": "toolu_repeated"}
            out.append({"type": "content_block_start", "index": first + 1, "content_block": block})
            out += [
                {
                    "type": "content_block_delta",
                    "index": first + 1,
                    "delta": {"type": "input_json_delta", "partial_json": text[at : at + 7]},
                }
                for at in range(0, len(text), 7)
            ]
            out.append({"type": "content_block_stop", "index": first + 1})
    return out


@pytest.mark.parametrize("name", [PARALLEL, "anthropic-haiku35-text-then-tool"])
def test_a_repeated_call_is_counted_and_left_alone_by_default(name: str):
    broken = streams.sse(call_twice(streams.parsed(name)))
    for pieces in every_cut(broken, name):
        out, repairs = repair(pieces)
        assert out == broken
        assert repairs == {Repair.CALL_DUPLICATED: 1}


@pytest.mark.parametrize("name", [PARALLEL, "anthropic-haiku35-text-then-tool"])
def test_dedupe_calls_drops_the_repeat_and_closes_up_the_later_blocks(name: str):
    broken = streams.sse(call_twice(streams.parsed(name)))
    expected, _ = repair(broken, dedupe=True)
    for pieces in every_cut(broken, name):
        out, repairs = repair(pieces, dedupe=True)
        assert out == expected
        assert repairs == {Repair.CALL_DUPLICATED: 1}
    result = check(expected)
    assert "toolu_repeated" not in [b["id"] for b in result.tool_uses]
    # exactly the recorded stream's events: the repeat gone, the blocks after it renumbered
    assert payloads(expected) == payloads(streams.recorded(name))


def test_calls_of_one_name_with_other_inputs_are_held_and_come_out_byte_identical():
    data = streams.recorded(PARALLEL)
    for pieces in every_cut(data, PARALLEL):
        assert repair(pieces, dedupe=True) == (data, {})


def test_a_held_repeat_cut_short_goes_out_as_it_came_without_a_finish():
    broken = streams.sse(call_twice(streams.parsed(PARALLEL)))
    stop = broken.index(b"event: content_block_stop", broken.index(b'"toolu_repeated"'))
    head = broken[: broken.rindex(b"event: content_block_delta", 0, stop)]  # inside its input
    out, repairs = repair(head, dedupe=True, complete=False)
    assert out == head
    assert not repairs


def test_a_repeated_markup_call_in_text_is_dropped_under_dedupe_calls():
    events = streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only"))
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    call = deltas[1]["delta"]["text"] + deltas[2]["delta"]["text"] + deltas[3]["delta"]["text"]
    deltas[3]["delta"]["text"] += call.replace('": ', '":')  # the same call again, other spacing
    broken = streams.sse(events)
    kept, kept_repairs = repair(broken)
    assert kept_repairs[Repair.CALL_DUPLICATED] == 1
    assert [b["type"] for b in check(kept).blocks] == ["text", "tool_use", "tool_use", "text"]
    expected, _ = repair(broken, dedupe=True)
    for pieces in every_cut(broken, "hermes-twice"):
        out, repairs = repair(pieces, dedupe=True)
        assert out == expected
        assert repairs[Repair.CALL_DUPLICATED] == 1
    result = check(expected)
    assert [b["type"] for b in result.blocks] == ["text", "tool_use", "text"]
    assert result.tool_uses[0]["input"] == {"location": 'Paris, "FR"'}
    assert result.message["stop_reason"] == "tool_use"


def test_the_protocol_entry_point_passes_dedupe_calls_on():
    broken = streams.sse(call_twice(streams.parsed(PARALLEL)))
    for dedupe, blocks in ((False, 5), (True, 4)):
        options = UpstreamOptions(dedupe_calls=dedupe)
        stream = PROTOCOL.native(new_id=lambda: "x", request=TOOLS_REQUEST, options=options)
        out = b"".join(stream.feed(broken) + stream.close(complete=True))
        assert len(check(out).blocks) == blocks


@pytest.mark.parametrize("dedupe", [False, True])
async def test_dedupe_calls_drops_a_repeated_block_through_the_proxy(
    start_upstream, start_proxy, dedupe: bool
):
    broken = streams.sse(call_twice(streams.parsed(PARALLEL)))
    server = await start_upstream(messages_upstream(broken, Recording()))
    proxy = await start_proxy(
        UpstreamSettings(name="n", url=upstream_url(server), messages="native", dedupe_calls=dedupe)
    )
    body = {**TOOLS_REQUEST, "stream": True}
    response = await proxy.post("/v1/messages", json=body)
    data = await response.read()
    assert response.status == 200
    ids = [b["id"] for b in check(data).tool_uses]
    if dedupe:
        assert payloads(data) == payloads(streams.recorded(PARALLEL))
    else:
        assert data == broken
        assert ids[1] == "toolu_repeated"


def long_repeat(deltas: int) -> bytes:
    """A call and its repeat, the repeat's input in ``deltas`` fragments: held all along."""
    events = streams.parsed("anthropic-haiku35-text-then-tool")
    events = call_twice(events)
    at = next(
        i for i, e in enumerate(events) if e.get("content_block", {}).get("id") == "toolu_repeated"
    )
    index = events[at]["index"]
    fragment = {"type": "content_block_delta", "index": index}
    body = [{**fragment, "delta": {"type": "input_json_delta", "partial_json": '{"x": "'}}]
    body += [{**fragment, "delta": {"type": "input_json_delta", "partial_json": "ab"}}] * deltas
    body += [{**fragment, "delta": {"type": "input_json_delta", "partial_json": '"}'}}]
    rest = [
        e for e in events[at + 1 :] if e.get("index") != index or e["type"] != "content_block_delta"
    ]
    return streams.sse([*events[: at + 1], *body, *rest])


def test_a_held_repeat_costs_the_same_per_event_however_long_it_is():
    def cpu(data: bytes, repeat: int) -> float:
        reads = [data[i : i + 1500] for i in range(0, len(data), 1500)]
        return least_cpu_seconds(lambda: repair(reads, dedupe=True), repeat)

    short = cpu(long_repeat(2_000), 3)
    long = cpu(long_repeat(32_000), 2)
    assert long < 40 * short, f"16x the input took {long / short:.0f}x the CPU"


@pytest.mark.parametrize("name", [PARALLEL, "anthropic-haiku35-text-then-tool"])
def test_a_repeat_in_llamacpps_shape_is_dropped_as_well(name: str):
    """llama.cpp's own endpoint: no ``input`` in the starts, every stop held to the end."""
    broken = streams.sse(streams.llamacpp_b9821(call_twice(streams.parsed(name))))
    expected, _ = repair(broken, dedupe=True)
    for pieces in every_cut(broken, name + "llamacpp"):
        out, repairs = repair(pieces, dedupe=True)
        assert out == expected
        assert repairs[Repair.CALL_DUPLICATED] == 1
    canonical = check(streams.recorded(name))
    result = check(expected)
    assert [(b["id"], b["input"]) for b in result.tool_uses] == [
        (b["id"], b["input"]) for b in canonical.tool_uses
    ]
    assert result.text == canonical.text
