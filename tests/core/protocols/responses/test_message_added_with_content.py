"""Issue 24 item 10: some gateways put the empty ``output_text`` part into a message's
``output_item.added`` that ``content_part.added`` then adds again, so a client that builds
the message from the events has the part twice. The message is added with ``content: []``
(``message-added-with-content``); a part that carries text is left as it came."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.responses.checker import check
from tests.support.normalizer import bytewise, random_cuts

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
GATEWAY = (FIELD / "gateway-message-added-with-content.responses.sse").read_bytes()


def run(pieces: Sequence[bytes], request: dict[str, Any]) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(request),
        options=UpstreamOptions(dialects=("auto",)),
    )
    out = [b for piece in pieces for b in stream.feed(piece)]
    return b"".join([*out, *stream.close(complete=True)]), stream.repairs


def added(out: bytes) -> dict[str, Any]:
    checked = check(out)
    [event] = [e for e in checked.events if e["type"] == "response.output_item.added"]
    item: dict[str, Any] = event["item"]
    return item


def test_the_message_is_added_empty_and_its_part_comes_once() -> None:
    request: dict[str, Any] = {"model": "gpt-4o-mini"}
    whole, repairs = run([GATEWAY], request)
    for pieces in [bytewise(GATEWAY), *random_cuts(GATEWAY, seed="gateway")]:
        assert run(pieces, request)[0] == whole
    assert added(whole)["content"] == []
    checked = check(whole)
    assert checked.text == "OK"
    [message] = checked.items
    assert [p["text"] for p in message["content"]] == ["OK"]
    assert repairs[Repair.MESSAGE_ADDED_WITH_CONTENT] == 1
    # only the added event changed: every other event is the upstream's, as it came
    changed = [line for line in whole.split(b"\n\n") if line and line not in GATEWAY]
    assert len(changed) == 1
    assert b"response.output_item.added" in changed[0]


def test_with_tools_offered_too() -> None:
    # markup extraction holds a message's opening until its text shows: the same repair
    request = {"model": "m", "tools": [{"type": "function", "name": "f", "parameters": {}}]}
    out, repairs = run([GATEWAY], request)
    assert added(out)["content"] == []
    assert repairs[Repair.MESSAGE_ADDED_WITH_CONTENT] == 1


def test_a_part_that_carries_text_is_left_as_it_came() -> None:
    empty = b'"content":[{"type":"output_text","annotations":[],"logprobs":[],"text":""}]'
    said = empty.replace(b'"text":""', b'"text":"OK"')
    assert GATEWAY.count(empty) == 1
    out, repairs = run([GATEWAY.replace(empty, said)], {"model": "m"})
    item = added(out)
    assert [p["text"] for p in item["content"]] == ["OK"]
    assert Repair.MESSAGE_ADDED_WITH_CONTENT not in repairs
