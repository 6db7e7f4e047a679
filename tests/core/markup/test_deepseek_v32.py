"""DeepSeek V3.2's DSML: ``string="true"`` values are text, ``string="false"`` values JSON.

The outputs are the ones of vLLM's ``vllm/tool_parsers/deepseekv32_tool_parser.py`` docstring
and ``tests/tool_parsers/test_deepseekv32_tool_parser.py``."""

from __future__ import annotations

import pytest

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import TOOLS, WEATHER, Call, calls, cuts, merged, run, text

FC, FC_END = "<｜DSML｜function_calls>", "</｜DSML｜function_calls>"
TIMER = {
    "type": "function",
    "function": {
        "name": "set_timer",
        "parameters": {
            "type": "object",
            "properties": {
                "wait": {
                    "anyOf": [
                        {"type": "object", "properties": {"minutes": {"type": "number"}}},
                        {"type": "null"},
                    ]
                },
                "patches": {"oneOf": [{"type": "array"}, {"type": "null"}]},
                "enabled": {"type": "boolean"},
                "count": {"type": "integer"},
            },
        },
    },
}
DSML_TOOLS = [WEATHER, TIMER]


def invoke(name: str, *params: tuple[str, str, str]) -> str:
    body = "".join(
        f'<｜DSML｜parameter name="{k}" string="{s}">{v}</｜DSML｜parameter>\n'
        for k, s, v in params
    )
    return f'<｜DSML｜invoke name="{name}">\n{body}</｜DSML｜invoke>\n'


def block(*invokes: str) -> str:
    return f"{FC}\n" + "".join(invokes) + FC_END


CASES = {
    "the reference's two calls, unicode": (
        block(
            invoke("get_weather", ("city", "true", "杭州"), ("note", "true", "2024-01-16")),
            invoke("get_weather", ("city", "true", "北京"), ("note", "true", "2024-01-16")),
        ),
        [
            Call("get_weather", {"city": "杭州", "note": "2024-01-16"}),
            Call("get_weather", {"city": "北京", "note": "2024-01-16"}),
        ],
        "",
    ),
    "no parameters, text before": (
        "Sure, let me check! " + block(invoke("get_time")),
        [Call("get_time", {})],
        "Sure, let me check! ",
    ),
    'string="false" values are JSON': (
        block(
            invoke(
                "set_timer",
                ("wait", "false", '{"type":"for","minutes":2880}'),
                ("patches", "false", '[{"op":"replace","path":"/schedule","value":"quiet"}]'),
                ("enabled", "false", "true"),
                ("count", "false", "42"),
            )
        ),
        [
            Call(
                "set_timer",
                {
                    "wait": {"type": "for", "minutes": 2880},
                    "patches": [{"op": "replace", "path": "/schedule", "value": "quiet"}],
                    "enabled": True,
                    "count": 42,
                },
            )
        ],
        "",
    ),
    'string="true" with a typed schema is typed by it; text keeps its whitespace': (
        block(invoke("get_weather", ("days", "true", "42"), ("city", "true", " Paris\n"))),
        [Call("get_weather", {"days": 42, "city": " Paris\n"})],
        "",
    ),
    'string="false" that is not JSON is typed by the schema, else text': (
        block(invoke("set_timer", ("enabled", "false", "True"), ("count", "false", "many"))),
        [Call("set_timer", {"enabled": True, "count": "many"})],
        "",
    ),
    "no string attribute: text": (
        f'{FC}<｜DSML｜invoke name="get_weather"><｜DSML｜parameter name="city">Paris'
        f"</｜DSML｜parameter></｜DSML｜invoke>{FC_END}",
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_deepseek_v32_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["deepseek_v32"], tools=DSML_TOOLS)
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_deepseek_v32_a_call_goes_out_when_its_invoke_closes():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    extractor = build_extractor(["deepseek_v32"], TOOLS)
    assert extractor is not None
    got = extractor.feed(
        f'{FC}\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="city" string="true">Lo'
    )
    assert got == []
    assert extractor.feed("ndon</｜DSML｜para") == []
    assert extractor.feed("meter>\n") == []
    assert merged(extractor.feed("</｜DSML｜invoke>")) == [
        CallOpen("get_weather"),
        CallArgs('{"city": "London"}'),
        CallClose(),
    ]


@pytest.mark.parametrize(
    "markup",
    [
        f"DeepSeek V3.2 writes {FC} before its calls.",
        f'{FC}\n<｜DSML｜invoke title="get_weather">\n</｜DSML｜invoke>\n{FC_END}',
        f'{FC}\n<｜DSML｜invoke name="get_weather" string="true">\n</｜DSML｜invoke>\n{FC_END}',
        f"{FC}\n<invoke name='get_weather'>\n</invoke>\n{FC_END}",
        FC,
    ],
)
def test_deepseek_v32_prose_and_malformed_blocks_stay_text(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["deepseek_v32"]) == [Text(markup)]


def test_deepseek_v32_a_broken_parameter_tag_is_given_back_as_text():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    markup = (
        f'{FC}\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="maybe">x</｜DSML｜parameter>'
    )
    for chunks in cuts(markup).values():
        assert run(chunks, ["deepseek_v32"]) == [Text(markup)]


def test_deepseek_v32_a_tag_broken_by_a_bracket_breaks_the_same_way_however_it_is_cut():
    """Found by fuzzing: a ``<`` inside a parameter tag was judged before the tag's ``>``
    arrived when cut, after it when whole, with different reasons on the call's close."""
    markup = (
        f'{FC}\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="city" string="true">Zürich</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name<"options" string="false">{"units": 1}</｜DSML｜parameter>\n'
        f"</｜DSML｜invoke>\n{FC_END}"
    )
    whole = run([markup], ["deepseek_v32"])
    assert whole == [Text(markup)]  # issue 24 item 4: given back whole (was: a call's error)
    for chunks in cuts(markup).values():
        assert run(chunks, ["deepseek_v32"]) == whole
