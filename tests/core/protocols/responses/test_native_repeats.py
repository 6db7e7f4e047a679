"""Issue 16's gap 4 in native Responses: the same function_call item twice in a row (Gemma 4
on llama.cpp, llama.cpp#21882), in the shapes only Responses servers send (llama.cpp's own
endpoint, arguments only in ``.done``). What every native repairer does with a repeat (counted,
held, dropped; canonical streams, cuts, the entry point, the proxy, the cost) is
tests/core/protocols/test_native_contract.py's. Whole, a byte at a time and at random cuts."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from proxy.core.repairs import Repair
from tests.core.protocols.native_cases import RESPONSES, r_stream
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check
from tests.support.native_responses import every_cutting, summary

MARKUP_TWICE = RESPONSES.markup_twice  # one hermes call twice in a message's text


# the canonical stream is the contract's (test_native_contract.py)
VARIANTS: dict[str, Callable[[v.Payloads], v.Payloads]] = {
    "llamacpp": v.llamacpp,
    "args-only-in-done": v.args_only_in_done,
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_repeated_call_is_counted_and_left_alone_by_default(variant: str):
    body = v.sse(VARIANTS[variant](r_stream(repeat=True)))
    out, repairs = every_cutting(body, dedupe=False)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    assert [c["call_id"] for c in check(out).calls] == ["call_w", "call_again", "call_t"]


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_dedupe_calls_drops_the_repeat_and_closes_up_the_later_items(variant: str):
    body = v.sse(VARIANTS[variant](r_stream(repeat=True)))
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    assert Repair.OUTPUT_INCOMPLETE not in repairs  # the terminal output loses the repeat too
    checked = check(out)  # strict: sequence_number and output_index dense, output as streamed
    assert summary(checked) == summary(check(v.sse(r_stream(repeat=False))))
    assert [i["type"] for i in checked.items] == ["message", "function_call", "function_call"]


def test_a_repeated_markup_call_dropped_leaves_the_first_call_and_the_text_around_it():
    body = MARKUP_TWICE
    # kept without dedupe_calls, and the kinds of items left: the contract's
    out, repairs = every_cutting(body, dedupe=True)
    assert repairs[Repair.CALL_DUPLICATED] == 1
    checked = check(out)
    assert [i["type"] for i in checked.items] == ["message", "function_call", "message"]
    assert [c["arguments"] for c in checked.calls] == ['{"location": "Paris"}']
    assert checked.text == "Let me check.  Done."
