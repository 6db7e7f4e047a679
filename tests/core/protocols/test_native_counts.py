"""A repair kind is counted each time the repair is made, in native mode as in chat (issue 26
item 16: native Responses counted a kind once a stream)."""

from __future__ import annotations

import itertools
import json

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.core.repairs import Repair
from tests.core.protocols.native_cases import REQUESTS
from tests.support import native_shapes as s


def repairs_of(protocol: str, events: list[bytes]) -> dict[str, int]:
    counter = itertools.count()
    stream = CLIENT_PROTOCOLS[protocol].native(
        new_id=lambda: f"i{next(counter)}", request=REQUESTS[protocol], options=UpstreamOptions()
    )
    for event in events:
        stream.feed(event)
    stream.close(complete=True)
    return dict(stream.repairs)


def without_event_line(event: bytes) -> bytes:
    return event[event.index(b"data: ") :]


def each_event(writes: list[bytes]) -> list[bytes]:
    return [event + b"\n\n" for event in b"".join(writes).split(b"\n\n") if event]


def test_native_responses_counts_every_event_it_repairs():
    events = each_event(s.sglang_calls(5))  # written without sequence numbers
    repairs = repairs_of("responses", [without_event_line(e) for e in events])
    assert repairs[Repair.SEQUENCE_NUMBER_MISSING] == len(events)
    assert repairs[Repair.EVENT_LINE_MISSING] == len(events)
    assert repairs[Repair.ITEM_DONE_MISSING] == 5  # one for each call never ended


def test_native_messages_counts_every_event_it_repairs():
    events = each_event(s.unstopped_blocks(5))
    repairs = repairs_of("messages", [without_event_line(e) for e in events])
    assert repairs[Repair.EVENT_LINE_MISSING] == len(events)
    assert repairs[Repair.BLOCKS_OVERLAP] == 4  # each block stopped when the next began


def test_the_shapes_are_what_they_claim():
    # the counts above are per event only if every event of the shape is one
    for event in each_event(s.sglang_calls(5) + s.unstopped_blocks(5)):
        assert "sequence_number" not in json.loads(without_event_line(event)[6:])


def test_native_messages_counts_a_block_that_waits_once_however_long_it_waits():
    # a block begun before the one streaming stopped waits for it: one overlap, not one for
    # every fragment of the other block that came while it waited
    events = [s.message_start(), s.tool_start(0), s.input_delta(0, '{"q": "'), s.tool_start(1)]
    events += [s.input_delta(0, "a") for _ in range(10)]
    events += [s.input_delta(0, '"}'), s.block_stop(0), s.input_delta(1, "{}"), s.block_stop(1)]
    repairs = repairs_of("messages", [*events, *s.message_end()])
    assert repairs[Repair.BLOCKS_OVERLAP] == 1
