"""Seed-OSS: Qwen3-Coder's tags in a ``<seed:tool_call>`` wrapper, thinking in ``<seed:think>``.

The outputs are ByteDance-Seed/Seed-OSS-36B-Instruct's, as vLLM's
``tests/tool_parsers/test_seed_oss_tool_parser.py`` records them at three thinking budgets."""

from __future__ import annotations

import pytest

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import TOOLS, WEATHER, Call, calls, cuts, run, text

CALL = (
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Barcelona, Spain</parameter>\n"
    "</function>\n</seed:tool_call>"
)
BUDGET_0 = (
    "<seed:think>\n</seed:cot_budget_reflect>\n</seed:cot_budget_reflect>\nThe current thinking "
    "budget is 0, so I will directly start answering the question.\n</seed:think>\n"
)
BUDGET_512 = (
    "<seed:think>The user's current thinking budget is 512.</seed:cot_budget_reflect>\nLet me "
    "analyze the question.\n<seed:cot_budget_reflect>I have used 131 tokens, and there are 381 "
    "tokens remaining for use.</seed:cot_budget_reflect>\n The unit parameter can be omitted "
    "since it's optional.</seed:think>\n"
)
REHEARSAL = (
    "<seed:think>\nGot it, let's see. Let me format the function call correctly. The format is "
    "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Barcelona, Spain</parameter>\n"
    "<parameter=days>2</parameter>\n</function>\n</seed:tool_call>. Wait, but does the unit "
    "parameter accept it?</seed:think>"
)

CASES = {
    "thinking budget 0": (
        BUDGET_0 + CALL,
        [Call("get_weather", {"city": "Barcelona, Spain"})],
        BUDGET_0,
    ),
    "thinking budget 512": (
        BUDGET_512 + CALL,
        [Call("get_weather", {"city": "Barcelona, Spain"})],
        BUDGET_512,
    ),
    "the format rehearsed while thinking is not a call": (
        REHEARSAL + CALL.replace("</parameter>\n", "</parameter>\n<parameter=days>3</parameter>\n"),
        [Call("get_weather", {"city": "Barcelona, Spain", "days": 3})],
        REHEARSAL,
    ),
    "two calls, no thinking": (
        CALL + "\n" + CALL.replace("get_weather", "get_time"),
        [
            Call("get_weather", {"city": "Barcelona, Spain"}),
            Call("get_time", {"city": "Barcelona, Spain"}),
        ],
        "\n",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_seed_oss_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["seed_oss"], tools=[WEATHER])
    assert calls(out) == expected_calls
    assert text(out) == expected_text  # the thinking stays text, the wrapper goes with the call


def test_seed_oss_thinking_is_given_out_as_it_arrives():
    extractor = build_extractor(["auto"], TOOLS)
    assert extractor is not None
    assert extractor.feed("<seed:think>I could write <tool_call>") == [
        Text("<seed:think>I could write <tool_call>")
    ]
    assert extractor.feed(' {"name": "get_time"} </seed:th') == [Text(' {"name": "get_time"} ')]
    assert extractor.held == len("</seed:th")
    assert extractor.feed("ink><seed:tool_call><function=get_time></function>") == [
        Text("</seed:think>"),
        CallOpen("get_time"),
        CallArgs("{"),
        CallArgs("}"),
        CallClose(),
    ]


def test_seed_oss_thinking_cut_short_is_all_text():
    markup = "<seed:think>The format is <seed:tool_call>\n<function=get_time>"
    for chunks in cuts(markup).values():
        assert run(chunks) == [Text(markup)]


def test_seed_oss_wrapper_is_no_longer_left_in_the_text_under_auto():
    out = run(cuts("Checking.\n" + CALL + "\nDone.")["tokens"])
    assert calls(out) == [Call("get_weather", {"city": "Barcelona, Spain"})]
    assert text(out) == "Checking.\n\nDone."


@pytest.mark.parametrize(
    "markup",
    [
        "Seed-OSS wraps calls in <seed:tool_call> tags.",
        "<seed:tool_call>\n<tool_call>get_weather</tool_call>\n</seed:tool_call>",
        "<seed:tool_call>\n<function=get weather>\n</function>\n</seed:tool_call>",
    ],
)
def test_seed_oss_prose_and_malformed_blocks_stay_text(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["seed_oss"]) == [Text(markup)]
