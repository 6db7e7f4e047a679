"""Issue 24 item 1, the native Messages twin: Kimi K2 and GLM behind Anthropic-compatible
endpoints send a ``message_delta`` (``stop_reason: "tool_use"``) after every ``tool_use``
block, so a block follows a stop. The client gets one ``message_delta`` per message, at its
end, after every block, with the last stop reason and usage (``message-delta-early``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proxy.core.repairs import Repair
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.core.protocols.messages.streams import parsed, recorded, sse

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
KIMI = (FIELD / "kimi-k2-stop-after-each-call.messages.sse").read_bytes()
ADD = {
    "model": "kimi-k2",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "add"}],
    "tools": [{"name": "add", "input_schema": {"type": "object"}}],
}


def types(out: bytes) -> list[str]:
    return [e["type"] for e in check(out).events]


def test_kimis_stop_after_each_call_comes_out_once_after_the_last_block() -> None:
    for pieces in every_cut(KIMI, "kimi"):
        out, repairs = repair(pieces, ADD)
        result = check(out)  # the strict checker: one message_delta, no block open, then stop
        assert [b["id"] for b in result.tool_uses] == ["functions.add:0", "functions.add:1"]
        assert [b["input"] for b in result.tool_uses] == [{"a": 1, "b": 2}, {"a": 2, "b": 3}]
        assert result.message["stop_reason"] == "tool_use"
        assert result.message["usage"]["output_tokens"] == 38  # the last delta's usage
        assert types(out)[-2:] == ["message_delta", "message_stop"]
        assert types(out).count("message_delta") == 1
        assert repairs[Repair.MESSAGE_DELTA_EARLY] == 1


def _delta(reason: str, tokens: int) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": reason, "stop_sequence": None},
        "usage": {"output_tokens": tokens},
    }


def test_a_delta_before_more_blocks_and_no_later_delta_goes_out_at_the_end() -> None:
    # the only message_delta came before the last block: it is the message's, so it goes out
    # once the message ends, set right for every block sent (tool_use)
    events = parsed("anthropic-haiku35-text-then-tool")
    delta = next(e for e in events if e["type"] == "message_delta")
    first_stop = next(i for i, e in enumerate(events) if e["type"] == "content_block_stop")
    rest = [e for e in events[first_stop + 1 :] if e["type"] != "message_delta"]
    moved = [*events[: first_stop + 1], {**delta, "delta": {"stop_reason": "end_turn"}}, *rest]
    out, repairs = repair(sse(moved))
    result = check(out)
    assert result.message["stop_reason"] == "tool_use"
    assert types(out).count("message_delta") == 1
    assert repairs[Repair.MESSAGE_DELTA_EARLY] == 1


def test_two_deltas_in_a_row_leave_the_last() -> None:
    events = parsed("anthropic-sonnet45-text-only")
    at = next(i for i, e in enumerate(events) if e["type"] == "message_delta")
    twice = [*events[:at], _delta("end_turn", 1), *events[at:]]
    out, repairs = repair(sse(twice))
    canonical, _ = repair(recorded("anthropic-sonnet45-text-only"))
    assert out == canonical  # the upstream's last delta, byte for byte
    assert repairs[Repair.MESSAGE_DELTA_EARLY] == 1


def test_a_stream_cut_after_the_delta_gets_it_and_nothing_more() -> None:
    cut = KIMI[: KIMI.index(b"event: message_stop")]
    out, _ = repair(cut, ADD, complete=False)
    events = [e["type"] for e in check(out, finished=False).events]
    assert events.count("message_delta") == 1
    assert b"message_stop" not in out
    assert out.endswith(b"\n\n")


def test_a_canonical_stream_is_unchanged_and_counts_nothing() -> None:
    for name in ("anthropic-haiku35-parallel-three-tools", "anthropic-sonnet45-text-only"):
        body = recorded(name)
        for pieces in every_cut(body, name):
            out, repairs = repair(pieces)
            assert out == body
            assert Repair.MESSAGE_DELTA_EARLY not in repairs
