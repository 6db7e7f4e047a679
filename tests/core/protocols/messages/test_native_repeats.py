"""Issue 16's gap 4 in native Messages: the same tool_use block twice in a row (Gemma 4 on
llama.cpp, llama.cpp#21882), in the shapes only Messages servers send (llama.cpp's own
endpoint: no ``input`` in the starts, every stop held to the end), and what a dropped markup
call leaves. What every native repairer does with a repeat (counted, held, dropped; canonical
streams, cuts, the entry point, the proxy, the cost) is tests/core/protocols/test_native_contract.py's.
Each case runs whole, a byte at a time and at random cuts."""

from __future__ import annotations

import pytest

from proxy.core.repairs import Repair
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.core.protocols.native_cases import M_PARALLEL, M_TEXT_THEN_TOOL, MESSAGES, call_twice


def test_a_repeated_markup_call_dropped_leaves_the_first_call_and_the_text_around_it():
    broken = MESSAGES.markup_twice
    # kept without dedupe_calls, and the kinds of blocks left: the contract's
    expected, _ = repair(broken, dedupe=True)
    result = check(expected)
    assert [b["type"] for b in result.blocks] == ["text", "tool_use", "text"]
    assert result.tool_uses[0]["input"] == {"location": 'Paris, "FR"'}
    assert result.message["stop_reason"] == "tool_use"


@pytest.mark.parametrize("name", [M_PARALLEL, M_TEXT_THEN_TOOL])
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
