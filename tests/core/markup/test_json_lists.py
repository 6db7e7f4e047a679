"""JSON lists of calls between tags of their own: Hunyuan-A13B and Nemotron Nano v2."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text

WEATHER = '{"name": "get_weather", "arguments": {"city": "Boston"}}'
TIME = '{"name": "get_time", "arguments": {}}'

CASES = {
    ("hunyuan", "vLLM's streamed case: </answer> after the block goes with it"): (
        f"<tool_calls>[{WEATHER}]</tool_calls>\n</answer>",
        [Call("get_weather", {"city": "Boston"})],
        "",
    ),
    ("hunyuan", "parallel inside <answer>, text before"): (
        f"I will call the tool now. <answer>\n<tool_calls>[{WEATHER}, "
        '{"name": "get_weather", "arguments": {"city": "北京", "days": 2, "options": '
        '{"a": {"b": [1, null]}}}}]</tool_calls>\n</answer>',
        [
            Call("get_weather", {"city": "Boston"}),
            Call("get_weather", {"city": "北京", "days": 2, "options": {"a": {"b": [1, None]}}}),
        ],
        "I will call the tool now. ",
    ),
    ("hunyuan", "text after the block stays"): (
        f"<tool_calls>[{TIME}]</tool_calls>\nThank you!",
        [Call("get_time", {})],
        "\nThank you!",
    ),
    ("nemotron", "parallel, text before"): (
        f"Checking both.<TOOLCALL>[{WEATHER}, {TIME}]</TOOLCALL>",
        [Call("get_weather", {"city": "Boston"}), Call("get_time", {})],
        "Checking both.",
    ),
    ("nemotron", "brackets left out, arguments as a JSON string"): (
        '<TOOLCALL>{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}</TOOLCALL>'
        " Done.",
        [Call("get_weather", {"city": "Oslo"})],
        " Done.",
    ),
    ("nemotron", "the stream ends before the closing tag"): (
        f"<TOOLCALL>[{WEATHER}]",
        [Call("get_weather", {"city": "Boston"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES, ids=" / ".join)
def test_json_list_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], [case[0]])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    ("dialect", "content"),
    [
        ("hunyuan", "<answer>The weather is fine.</answer>"),
        ("hunyuan", "<answer>\n42\n</answer>"),
        ("hunyuan", "Close it with </answer> and <tool_calls> tags."),
        ("hunyuan", "<tool_calls>not a list</tool_calls>"),
        ("hunyuan", '<tool_calls>[{"name": 3}]</tool_calls>'),
        ("nemotron", "<TOOLCALL> is how I call tools."),
        ("nemotron", "<TOOLCALL>[1, 2]</TOOLCALL>"),
    ],
)
def test_json_list_markup_that_is_not_a_call_is_content(dialect, content):
    for chunks in cuts(content).values():
        assert run(chunks, [dialect]) == [Text(content)]


def test_hunyuan_answer_tags_stay_where_they_wrap_no_block():
    content = f"<answer>Sure.</answer><answer><tool_calls>[{TIME}]</tool_calls></answer>"
    for chunks in cuts(content).values():
        out = run(chunks, ["hunyuan"])
        assert calls(out) == [Call("get_time", {})]
        assert text(out) == "<answer>Sure.</answer>"


def test_json_list_broken_after_a_call_opened_is_given_back_as_text():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    content = '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": <}}]</TOOLCALL>'
    assert run([content], ["nemotron"]) == [Text(content)]


def test_json_list_a_complete_call_stays_when_a_later_one_breaks():
    # Issue 24 item 4: calls are given out one by one as each completes; the broken one's
    # text comes back from the end of the last complete call.
    content = (
        '<TOOLCALL>[{"name": "get_time", "arguments": {}}, '
        '{"name": "get_weather", "arguments": {"city": "Par</TOOLCALL>'
    )
    for chunks in cuts(content).values():
        out = run(chunks, ["nemotron"])
        assert calls(out) == [Call("get_time", {})]
        assert text(out) == ', {"name": "get_weather", "arguments": {"city": "Par</TOOLCALL>'
