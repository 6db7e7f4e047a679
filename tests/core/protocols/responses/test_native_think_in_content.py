"""``think_in_content`` in a native Responses stream (issue 24 item 11): the output's first
message, when its text begins with ``<think>``, becomes a reasoning item of that text (one
summary part, as the whole native Response gets it) and the message with the rest, however
the stream is read or cut; the terminal ``output`` says the same; a text without one keeps
its bytes; off (the default) nothing changes (tests/fixtures/field, ``think-in-text``)."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from typing import Any

import pytest

from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from proxy.core.protocols.think import leading_think
from tests.core.protocols.responses import checker
from tests.fixtures.field import report
from tests.support.normalizer import bytewise, cut, eventwise

STREAM = next(s for s in report.load() if s.file == "think-in-text.responses.sse")
REASONING, REST = "\nThe user wants the weather.\n", "\n\nIt is sunny in Paris."
DELTA = b'"delta":"<think>"'


def run(
    body: bytes | list[bytes], *, think: bool = True, complete: bool = True, **extra: Any
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    options = dataclasses.replace(report.options(), think_in_content=think, **extra)
    native = CLIENT_PROTOCOLS["responses"].native(
        new_id=lambda: f"n{next(counter)}",
        request=report.responses_request(STREAM),
        options=options,
    )
    reads = [body] if isinstance(body, bytes) else body
    out = b"".join([b for read in reads for b in native.feed(read)])
    return out + b"".join(native.close(complete=complete)), native.repairs


def texts(events: list[dict[str, Any]]) -> tuple[str, str]:
    """The reasoning and the message text the client was sent, deltas joined."""
    kinds = {"response.reasoning_summary_text.delta": 0, "response.output_text.delta": 1}
    joined = ["", ""]
    for event in events:
        if event["type"] in kinds:
            joined[kinds[event["type"]]] += event["delta"]
    return joined[0], joined[1]


EXPECTED = [
    {"id": "rs_n1", "type": "reasoning", "summary": [{"type": "summary_text", "text": REASONING}]},
    {
        "id": "msg_think01",
        "type": "message",
        "status": "completed",
        "content": [{"type": "output_text", "annotations": [], "logprobs": [], "text": REST}],
        "role": "assistant",
    },
]


@pytest.mark.parametrize("cutting", ["whole", "events", "bytes"])
def test_the_leading_block_is_a_reasoning_item(cutting: str) -> None:
    reads: dict[str, list[bytes]] = {
        "whole": [STREAM.body],
        "events": eventwise(STREAM.body),
        "bytes": bytewise(STREAM.body),
    }
    out, repairs = run(reads[cutting])
    result = checker.check(out)  # dense output_index, items never interleave, output == items
    assert result.items == EXPECTED
    assert result.response is not None
    assert result.response["output"] == EXPECTED
    assert [(e["output_index"], e["item"]["type"]) for e in result.events if "item" in e] == [
        (0, "reasoning"),
        (0, "reasoning"),
        (1, "message"),
        (1, "message"),
    ]
    assert texts(result.events) == (REASONING, REST)
    assert repairs["think-in-content"] == 1
    assert "completed-output-incomplete" not in repairs  # the terminal's output is split too


def test_read_in_two_at_every_byte_the_stream_comes_out_the_same() -> None:
    whole, _ = run(STREAM.body)
    for at in range(len(STREAM.body) + 1):
        assert run(cut(STREAM.body, [at]))[0] == whole, at


def test_cut_at_every_byte_the_client_gets_what_came_split_and_no_end() -> None:
    """Cut anywhere: the text that came, split as a whole text would be (what the splitter
    held goes out), nothing twice; at an event's end a well-formed stream without a terminal
    event, inside one what was held as it came, then the cut event's bytes (the cap's rule)."""
    start = STREAM.body.index(b"event: response.output_item.added")  # the response began
    for at in range(start, len(STREAM.body)):
        body = STREAM.body[:at]
        out, _ = run(body, complete=False)
        tail = body[body.rindex(b"\n\n") + 2 :]
        assert out.endswith(tail), at
        head = out[: len(out) - len(tail)]
        if tail:
            events = [payload for _, payload in checker.parse(head)]
        else:
            events = checker.check(head, complete=False).events  # no terminal event
        came = "".join(
            p["delta"]
            for _, p in checker.parse(body[: len(body) - len(tail)])
            if p["type"] == "response.output_text.delta"
        )
        split = leading_think(came)
        reasoning, rest = texts(events)
        if any(e.get("item", {}).get("type") == "reasoning" for e in events):
            assert split is not None, at
            assert (reasoning, rest) == split, at
        else:
            assert (reasoning, rest) == ("", came), at
        assert b"response.completed" not in head, at


def canonical(body: bytes) -> bytes:
    """The stream as the repairer writes it without the option: nothing left to repair."""
    return run(body, think=False)[0]


PLAIN = {
    "no block": DELTA.replace(b"<think>", b"Hello"),
    "a prefix of <think>, then not": DELTA.replace(b"<think>", b"<thi"),
    "whitespace, then <thinking>": DELTA.replace(b"<think>", b"  <thinking>"),
    "a lone <": DELTA.replace(b"<think>", b"<"),
}


@pytest.mark.parametrize("shape", PLAIN)
def test_a_text_without_a_leading_block_keeps_its_bytes(shape: str) -> None:
    body = canonical(STREAM.body.replace(DELTA, PLAIN[shape], 1))
    assert canonical(body) == body
    for reads in ([body], bytewise(body), *(cut(body, [at]) for at in range(len(body) + 1))):
        out, repairs = run(reads)
        assert out == body
        assert not repairs


def test_off_the_stream_is_as_without_the_feature() -> None:
    body = canonical(STREAM.body)
    out, repairs = run(body, think=False)
    assert out == body
    assert b"<think>" in out
    assert not repairs


def test_a_block_that_never_closes_is_reasoning_to_the_message_end() -> None:
    body = STREAM.body.replace(b'"delta":"</think>"', b'"delta":"</thin"', 1)
    out, repairs = run(body)
    result = checker.check(out)
    reasoning, rest = texts(result.events)
    assert reasoning.startswith(REASONING + "</thin")
    assert rest == ""
    assert [item["type"] for item in result.items] == ["reasoning", "message"]
    assert repairs["think-in-content"] == 1


def test_at_the_cap_what_was_held_goes_out_and_nothing_is_lost() -> None:
    """A cap smaller than the held opening: rewriting stops, the held events go out as
    they came (the splitter had not decided yet), then every byte."""
    out, repairs = run(STREAM.body, max_held_bytes=300)
    assert repairs["cap-reached"] == 1
    assert b'"delta":"<think>"' in out
    assert out.endswith(STREAM.body[STREAM.body.index(b"event: response.completed") :])
