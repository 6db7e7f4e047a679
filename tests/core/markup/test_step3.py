"""Step-3's ``steptml`` calls between ``<｜tool_calls_begin｜>`` and ``<｜tool_calls_end｜>``.

The outputs are the ones of SGLang's ``step3_detector.py`` docstring and vLLM's
``tests/tool_parsers/test_step3_tool_parser.py``."""

from __future__ import annotations

import pytest

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import TOOLS, WEATHER, Call, calls, cuts, merged, run, text

B, E = "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>"
CB, CE, SEP = "<｜tool_call_begin｜>", "<｜tool_call_end｜>", "<｜tool_sep｜>"
TYPES = {
    "type": "function",
    "function": {
        "name": "test_function",
        "parameters": {
            "type": "object",
            "properties": {
                "string_field": {"type": "string"},
                "int_field": {"type": "integer"},
                "float_field": {"type": "number"},
                "bool_field": {"type": "boolean"},
                "null_field": {"type": "null"},
                "array_field": {"type": "array"},
                "object_field": {"type": "object"},
            },
        },
    },
}
STEP3_TOOLS = [WEATHER, TYPES]


def param(key: str, value: str) -> str:
    return f'<steptml:parameter name="{key}">{value}</steptml:parameter>'


CASES = {
    "SGLang's layout, text around": (
        f"Let me help you.\n{B}\n{CB}function{SEP}"
        f'<steptml:invoke name="get_weather">\n{param("city", "Shanghai")}\n'
        f"{param('days', '5')}\n</steptml:invoke>{CE}\n{E}\nHere are the results...",
        [Call("get_weather", {"city": "Shanghai", "days": 5})],
        "Let me help you.\n\nHere are the results...",
    ),
    "vLLM's parallel calls, a separator between them, no type": (
        f'{B}{CB}<steptml:invoke name="get_weather">{param("city", "Tokyo")}</steptml:invoke>'
        f'{CE}{SEP}{CB}<steptml:invoke name="get_time">{param("timezone", "Asia/Tokyo")}'
        f"</steptml:invoke>{CE}{E}",
        [Call("get_weather", {"city": "Tokyo"}), Call("get_time", {"timezone": "Asia/Tokyo"})],
        "",
    ),
    "vLLM's data types": (
        f'{B}{CB}function{SEP}<steptml:invoke name="test_function">'
        + param("string_field", "hello")
        + param("int_field", "42")
        + param("float_field", "3.14")
        + param("bool_field", "true")
        + param("null_field", "null")
        + param("array_field", '["a", "b", "c"]')
        + param("object_field", '{"nested": "value"}')
        + f"</steptml:invoke>{CE}{E}",
        [
            Call(
                "test_function",
                {
                    "string_field": "hello",
                    "int_field": 42,
                    "float_field": 3.14,
                    "bool_field": True,
                    "null_field": None,
                    "array_field": ["a", "b", "c"],
                    "object_field": {"nested": "value"},
                },
            )
        ],
        "",
    ),
    "empty arguments": (
        f'{B}{CB}<steptml:invoke name="get_time"></steptml:invoke>{CE}{E}',
        [Call("get_time", {})],
        "",
    ),
    "the name repeated after the separator; string whitespace kept, typed trimmed": (
        f'{B}{CB}function{SEP}get_weather\n<steptml:invoke name="get_weather">'
        + param("city", "    if x:\n        return 1\n")
        + param("days", " 4 ")
        + param("metric", " true ")
        + f"</steptml:invoke>{CE}{E}",
        [Call("get_weather", {"city": "    if x:\n        return 1\n", "days": 4, "metric": True})],
        "",
    ),
    "escaped strings": (
        f'{B}{CB}function{SEP}<steptml:invoke name="get_weather">'
        + param("city", 'He said "hello"')
        + param("note", "C:\\Users\\file.txt")
        + f"</steptml:invoke>{CE}{E}",
        [Call("get_weather", {"city": 'He said "hello"', "note": "C:\\Users\\file.txt"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_step3_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["step3"], tools=STEP3_TOOLS)
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_step3_a_call_goes_out_when_its_invoke_closes():
    extractor = build_extractor(["step3"], TOOLS)
    assert extractor is not None
    got = extractor.feed(
        f'{B}{CB}function{SEP}<steptml:invoke name="get_weather"><steptml:parameter name="city">Os'
    )
    # Issue 24 item 4: held until the call's markup is complete (was: streamed as written).
    assert got == []
    assert extractor.feed("lo</steptml:param") == []
    assert merged(extractor.feed("eter></steptml:invoke>")) == [
        CallOpen("get_weather"),
        CallArgs('{"city": "Oslo"}'),
        CallClose(),
    ]


def test_step3_is_not_deepseek():
    deepseek = (
        "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_time<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    )
    assert run([deepseek], ["step3"]) == [Text(deepseek)]
    step3 = f'{B}{CB}<steptml:invoke name="get_time"></steptml:invoke>{CE}{E}'
    assert run([step3], ["deepseek"]) == [Text(step3)]


@pytest.mark.parametrize(
    "markup",
    [
        f"Step-3 opens its calls with {B} and ends them with {E}.",
        f'{B}{CB}method{SEP}<steptml:invoke name="get_weather"></steptml:invoke>{CE}{E}',
        f'{B}{CB}function{SEP}<invoke name="get_weather"></invoke>{CE}{E}',
        f"{B}{CB}function{SEP}get_weather{CE}{E}",
        B,
    ],
)
def test_step3_prose_and_malformed_blocks_stay_text(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["step3"]) == [Text(markup)]


def test_step3_block_without_its_call_end_keeps_the_call_and_gives_back_the_rest():
    markup = f'{B}{CB}<steptml:invoke name="get_time"></steptml:invoke>{E}'
    out = run(cuts(markup)["tokens"], ["step3"])
    (call,) = calls(out)
    assert call == Call("get_time", {})
    assert text(out) == E
