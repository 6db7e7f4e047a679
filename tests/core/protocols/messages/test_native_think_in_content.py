"""``think_in_content`` in a native Messages stream (issue 24 items 11 and 3b): the message's
first text block, when its text begins with ``<think>``, becomes a thinking block of that
text and a text block of the rest, however the stream is cut; a text without one keeps its
bytes; off (the default) nothing changes (tests/fixtures/field, ``think-in-text``)."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import pytest

from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from tests.core.protocols.messages import checker
from tests.fixtures.field import report
from tests.support.normalizer import bytewise, eventwise

STREAM = next(s for s in report.load() if s.file == "think-in-text.messages.sse")


def run(body: bytes | list[bytes], *, think: bool = True, complete: bool = True) -> Any:
    counter = itertools.count(1)
    options = dataclasses.replace(report.options(), think_in_content=think)
    native = CLIENT_PROTOCOLS["messages"].native(
        new_id=lambda: f"n{next(counter)}", request=report.messages_request(STREAM), options=options
    )
    reads = [body] if isinstance(body, bytes) else body
    out = b"".join([b for read in reads for b in native.feed(read)])
    return out + b"".join(native.close(complete=complete)), native.repairs


@pytest.mark.parametrize("cutting", ["whole", "events", "bytes"])
def test_the_leading_block_is_a_thinking_block(cutting: str) -> None:
    reads: dict[str, list[bytes]] = {
        "whole": [STREAM.body],
        "events": eventwise(STREAM.body),
        "bytes": bytewise(STREAM.body),
    }
    out, repairs = run(reads[cutting])
    result = checker.check(out)
    assert result.blocks == [
        {"type": "thinking", "thinking": "\nThe user wants the weather.\n", "signature": ""},
        {"type": "text", "text": "\n\nIt is sunny in Paris."},
    ]
    assert result.message["stop_reason"] == "end_turn"
    assert repairs["think-in-content"] == 1


def test_off_or_without_a_leading_block_the_stream_keeps_its_bytes() -> None:
    out, repairs = run(STREAM.body, think=False)
    assert out == STREAM.body
    assert not repairs
    plain = STREAM.body.replace(b'"text":"<think>"', b'"text":"Hello"', 1)
    out, repairs = run(plain)
    assert out == plain
    assert "think-in-content" not in repairs


def test_a_stream_cut_inside_the_block_gives_its_reasoning_and_no_clean_end() -> None:
    body = STREAM.body[: STREAM.body.index(b"</think>")]
    out, _ = run(body, complete=False)
    assert b"The user wants" in out
    assert b"thinking_delta" in out
    assert b"message_stop" not in out
