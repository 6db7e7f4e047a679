"""Issue 24 item 9: a second ``message_start`` in a native Messages stream, an overlapping
generation spliced into the same stream (vercel/ai#18331, behind Google Vertex). The earlier
generation's blocks went out already (nothing holds every block): its open block is stopped
where it stands, the later generation's blocks follow at the next indexes intact, and the
message ends as the later generation says (``generation-spliced``)."""

from __future__ import annotations

from pathlib import Path

from proxy.core.repairs import Repair
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.core.protocols.messages.streams import message_start_twice, parsed, sse

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
VERTEX = (FIELD / "vertex-spliced-message-start.messages.sse").read_bytes()
LOOKUP = {
    "model": "claude-sonnet-4-20250514",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "look it up"}],
    "tools": [{"name": "lookup", "input_schema": {"type": "object"}}],
}


def test_the_later_generation_follows_the_earlier_and_its_stop_reason_wins() -> None:
    for pieces in every_cut(VERTEX, "vertex"):
        out, repairs = repair(pieces, LOOKUP)
        result = check(out, abandoned=frozenset({"toolu_first"}))
        assert [(b["type"], b.get("id")) for b in result.blocks] == [
            ("thinking", None),
            ("tool_use", "toolu_first"),
            ("thinking", None),
            ("tool_use", "toolu_second"),
        ]
        assert [b.get("thinking") for b in result.blocks[::2]] == [
            "first reasoning",
            "second reasoning",
        ]
        assert result.blocks[1]["input_unparsed"] == '{"value":"Spark'  # as far as it came
        assert result.blocks[3]["input"] == {"value": "Spark"}
        assert result.message["id"] == "msg_first"  # the client's one message
        assert result.message["stop_reason"] == "tool_use"
        assert repairs[Repair.GENERATION_SPLICED] == 1
        assert repairs[Repair.MESSAGE_START_REPEATED] == 1
        assert Repair.TOOL_INPUT_UNPARSABLE not in repairs


def test_a_duplicated_message_start_before_any_block_is_no_splice() -> None:
    name = "anthropic-haiku35-text-then-tool"
    out, repairs = repair(sse(message_start_twice(parsed(name))))
    assert out == sse(parsed(name))  # the stream as it was without the copy
    assert repairs[Repair.MESSAGE_START_REPEATED] == 1
    assert Repair.GENERATION_SPLICED not in repairs


def test_the_later_generations_own_cut_input_still_ends_max_tokens() -> None:
    # the hardening rule holds for the generation that ends the message
    cut = VERTEX.replace(b'"{\\"value\\":\\"Spark\\"}"', b'"{\\"value\\":\\"Sp"')
    assert cut != VERTEX
    out, repairs = repair(cut, LOOKUP)
    assert check(out).message["stop_reason"] == "max_tokens"
    assert repairs[Repair.TOOL_INPUT_UNPARSABLE] == 1
