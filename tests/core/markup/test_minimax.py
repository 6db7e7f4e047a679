"""MiniMax-M2's ``<minimax:tool_call>`` blocks of ``invoke`` elements, typed by the schema.

The outputs are the MiniMax-M2.5 tool-calling guide's and the ones vLLM's
``tests/tool_parsers/test_minimax_m2_tool_parser.py`` streams."""

from __future__ import annotations

import pytest

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import TOOLS, WEATHER, Call, calls, cuts, merged, run, text

SEARCH = {
    "type": "function",
    "function": {
        "name": "search_web",
        "parameters": {
            "type": "object",
            "properties": {
                "query_list": {"type": "array", "items": {"type": "string"}},
                "query_tag": {"type": "array", "items": {"type": "string"}},
            },
        },
    },
}
PROFILE = {
    "type": "function",
    "function": {
        "name": "update_profile",
        "parameters": {
            "type": "object",
            "properties": {
                "nickname": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                "config": {"anyOf": [{"type": "object"}, {"type": "null"}]},
            },
        },
    },
}
GUIDE_TOOLS = [WEATHER, SEARCH, PROFILE]


def invoke(name: str, quote: str = '"', **params: str) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params.items())
    return f"<invoke name={quote}{name}{quote}>\n{body}</invoke>\n"


def block(*invokes: str) -> str:
    return "<minimax:tool_call>\n" + "".join(invokes) + "</minimax:tool_call>"


CASES = {
    "the guide's two searches, arrays typed": (
        block(
            invoke(
                "search_web",
                query_tag='["technology", "events"]',
                query_list='["\\"OpenAI\\" \\"latest\\" \\"release\\""]',
            ),
            invoke(
                "search_web",
                query_tag='["technology", "events"]',
                query_list='["\\"Gemini\\" \\"latest\\" \\"release\\""]',
            ),
        ),
        [
            Call(
                "search_web",
                {
                    "query_tag": ["technology", "events"],
                    "query_list": ['"OpenAI" "latest" "release"'],
                },
            ),
            Call(
                "search_web",
                {
                    "query_tag": ["technology", "events"],
                    "query_list": ['"Gemini" "latest" "release"'],
                },
            ),
        ],
        "",
    ),
    "the guide's weather call after text": (
        "Let me help you query the weather.\n"
        + block(invoke("get_weather", city="San Francisco", metric="true", days="5")),
        [Call("get_weather", {"city": "San Francisco", "metric": True, "days": 5})],
        "Let me help you query the weather.\n",
    ),
    "vLLM's one-line block, two invokes, text after": (
        '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Seattle</parameter>'
        '</invoke><invoke name="get_time"></invoke></minimax:tool_call> Done.',
        [Call("get_weather", {"city": "Seattle"}), Call("get_time", {})],
        " Done.",
    ),
    "quoted with ' or bare, unknown function keeps text": (
        block(invoke("get_weather", quote="'", note="null"), invoke("lookup", quote="", q="7")),
        [Call("get_weather", {"note": None}), Call("lookup", {"q": "7"})],
        "",
    ),
    "multi-line value: one newline each side is the layout's": (
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">\n'
        "  São Paulo\n  centro\n\n</parameter>\n</invoke>\n</minimax:tool_call>",
        [Call("get_weather", {"city": "  São Paulo\n  centro\n"})],
        "",
    ),
    "vLLM's anyOf-nullable parameters": (
        block(
            invoke("update_profile", nickname="Alice", config='{"theme": "dark", "fontSize": 14}'),
            invoke("update_profile", nickname="null", config="null"),
        ),
        [
            Call(
                "update_profile", {"nickname": "Alice", "config": {"theme": "dark", "fontSize": 14}}
            ),
            Call("update_profile", {"nickname": None, "config": None}),
        ],
        "",
    ),
    "nested object and a value that fits no type": (
        block(invoke("get_weather", options='{"deep": {"x": [1, null]}}', days="three")),
        [Call("get_weather", {"options": {"deep": {"x": [1, None]}}, "days": "three"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_minimax_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["minimax_m2"], tools=GUIDE_TOOLS)
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_minimax_a_call_goes_out_when_its_invoke_closes():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    extractor = build_extractor(["minimax_m2"], TOOLS)
    assert extractor is not None
    got = extractor.feed(
        '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="city">New '
    )
    assert got == []
    assert extractor.feed("York</para") == []
    assert extractor.feed("meter>") == []
    assert merged(extractor.feed("</invoke>")) == [
        CallOpen("get_weather"),
        CallArgs('{"city": "New York"}'),
        CallClose(),
    ]


def test_minimax_typed_values_go_out_complete():
    extractor = build_extractor(["minimax_m2"], TOOLS)
    assert extractor is not None
    extractor.feed('<minimax:tool_call><invoke name="get_weather"><parameter name="days">1')
    assert extractor.feed("2") == []
    assert extractor.feed("</parameter>") == []  # issue 24 item 4: held to the call's end
    assert merged(extractor.feed("</invoke>")) == [
        CallOpen("get_weather"),
        CallArgs('{"days": 12}'),
        CallClose(),
    ]


@pytest.mark.parametrize(
    "markup",
    [
        "Calls go in <minimax:tool_call> blocks with <invoke> inside.",
        '<minimax:tool_call>\n<invoke nam="get_weather">\n</invoke>\n</minimax:tool_call>',
        '<minimax:tool_call>\n<call name="get_weather">\n</call>\n</minimax:tool_call>',
        '<minimax:tool_call>\n<invoke name="get weather">\n</invoke>\n</minimax:tool_call>',
        "<minimax:tool_call>\n<invoke name=" + "x" * 300,
        "<minimax:tool_call>",
    ],
)
def test_minimax_prose_and_malformed_blocks_stay_text(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["minimax_m2"]) == [Text(markup)]


def test_minimax_block_cut_short_is_given_back_as_text():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    markup = '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="days">3'
    assert run(cuts(markup)["tokens"], ["minimax_m2"]) == [Text(markup)]
