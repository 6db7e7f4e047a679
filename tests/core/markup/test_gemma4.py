"""Gemma 4's call syntax, with its tokens and with them stripped (vLLM's gemma4 parser)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, Text
from tests.core.markup.helpers import TOOLS, Call, calls, cut, cuts, run, text, tokens

Q = '<|"|>'
OPEN, CLOSE = "<|tool_call>", "<tool_call|>"

CASES = {
    "vLLM's example, text before": (
        f"Let me check. {OPEN}call:get_weather{{city:{Q}Tokyo{Q}}}{CLOSE}",
        [Call("get_weather", {"city": "Tokyo"})],
        "Let me check. ",
    ),
    "parallel, literals, nested object and list, text after": (
        f"{OPEN}call:get_weather{{city:{Q}San Francisco{Q},days:3,metric:true,ratio:-0.5,"
        f"note:null,options:{{units:{Q}C{Q},deep:[1,{{x:none}},nil]}},tags:[{Q}a{Q},{Q}b{Q}]}}"
        f"{CLOSE}{OPEN}call:get_time{{}}{CLOSE}The weather is ...",
        [
            Call(
                "get_weather",
                {
                    "city": "San Francisco",
                    "days": 3,
                    "metric": True,
                    "ratio": -0.5,
                    "note": None,
                    "options": {"units": "C", "deep": [1, {"x": None}, None]},
                    "tags": ["a", "b"],
                },
            ),
            Call("get_time", {}),
        ],
        "The weather is ...",
    ),
    "strings hold quotes, backslashes, brackets, commas and line breaks": (
        f'{OPEN}call:get_weather{{city:{Q}say "hi" \\ {{a,b}}: [x]\n<br>{Q}}}{CLOSE}',
        [Call("get_weather", {"city": 'say "hi" \\ {a,b}: [x]\n<br>'})],
        "",
    ),
    "quoted keys, JSON strings, spaces": (
        f'{OPEN}call:get_weather{{ {Q}city{Q} : "Zürich" , "days": 2 }}{CLOSE}',
        [Call("get_weather", {"city": "Zürich", "days": 2})],
        "",
    ),
    "bare values typed by the schema": (
        f"{OPEN}call:get_weather{{city:42,days:4.0,metric:True,tags:[1,x]}}{CLOSE}",
        [Call("get_weather", {"city": "42", "days": 4, "metric": True, "tags": [1, "x"]})],
        "",
    ),
    "string delimiters stripped inside the tags": (
        f"{OPEN}call:get_weather{{city:Paris, France,days:3}}{CLOSE}",
        [Call("get_weather", {"city": "Paris, France", "days": 3})],
        "",
    ),
    "every token stripped (vLLM /responses), at the start": (
        "call:get_weather{city:Paris, France {north},days:3}\nIt is sunny.",
        [Call("get_weather", {"city": "Paris, France {north}", "days": 3})],
        "\nIt is sunny.",
    ),
    "every token stripped, two calls": (
        "call:get_weather{city:Lyon}call:get_time{}",
        [Call("get_weather", {"city": "Lyon"}), Call("get_time", {})],
        "",
    ),
    "llama.cpp's test-chat cases: empty list and dict, negative, exponent, nested": (
        f"{OPEN}call:todo_list{{todos:[]}}{CLOSE}{OPEN}call:set_config{{config:{{}}}}{CLOSE}"
        f"{OPEN}call:special_function{{arg1:-7}}{CLOSE}{OPEN}call:amount{{orig:1.5e10}}{CLOSE}"
        f"{OPEN}call:set_config{{config:{{theme:{Q}dark{Q},count:3}}}}{CLOSE}",
        [
            Call("todo_list", {"todos": []}),
            Call("set_config", {"config": {}}),
            Call("special_function", {"arg1": -7}),
            Call("amount", {"orig": 1.5e10}),
            Call("set_config", {"config": {"theme": "dark", "count": 3}}),
        ],
        "",
    ),
    "a trailing comma is dropped": (
        f"{OPEN}call:get_weather{{tags:[{Q}a{Q},],city:{Q}Rome{Q},}}{CLOSE}",
        [Call("get_weather", {"tags": ["a"], "city": "Rome"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_gemma4_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["gemma4"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_gemma4_string_arguments_stream_as_they_arrive():
    extractor = build_extractor(["gemma4"], TOOLS)
    assert extractor is not None
    fed = ""
    for token in tokens(f"{OPEN}call:get_weather{{city:{Q}San Francisco, CA{Q}}}{CLOSE}"):
        out = extractor.feed(token)
        fed += "".join(s.text for s in out if isinstance(s, CallArgs))
        if token == "Franc":
            assert fed == '{"city": "San Franc'  # before the string ends
    assert fed + "".join(s.text for s in extractor.close() if isinstance(s, CallArgs)) == (
        '{"city": "San Francisco, CA"}'
    )


@pytest.mark.parametrize(
    "content",
    [
        "Try call:get_weather{city:Paris} later.",  # the stripped form only at the start
        "call:unknown{city:Paris}",  # not a function of this request
        "call:get_weather{town:Paris}",  # not a parameter of that function
        "call:get_weather{city:Paris} and more on the same line",  # no end of the call
        f"{OPEN} is the token Gemma opens a call with.",
        f"{OPEN}call:get weather{{}}{CLOSE}",
        "calling is fine",
    ],
)
def test_gemma4_other_content_is_untouched(content):
    for chunks in cuts(content).values():
        assert run(chunks, ["gemma4"]) == [Text(content)]


def test_gemma4_markup_cut_short_is_given_back_as_text():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    markup = f"{OPEN}call:get_weather{{city:{Q}Par"
    assert run(tokens(markup), ["gemma4"]) == [Text(markup)]


STRIPPED = "call:get_weather{city:Paris, France {north},days:3,tags:[a,1]}call:get_time{}\nOK"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_gemma4_stripped_form_does_not_depend_on_the_cuts(data):
    whole = run([STRIPPED], ["gemma4"])
    assert calls(whole) == [
        Call("get_weather", {"city": "Paris, France {north}", "days": 3, "tags": ["a", 1]}),
        Call("get_time", {}),
    ]
    assert run(cut(data, STRIPPED), ["gemma4"]) == whole


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_gemma4_stripped_form_cut_short_or_mutated_is_content(data):
    """Held until whole, the stripped form either parses or is given back unchanged."""
    at = data.draw(st.integers(0, len(STRIPPED) - 1))
    content = STRIPPED[:at] + data.draw(st.sampled_from(["", "x", ",", "}", ":"]))
    out = run(cut(data, content), ["gemma4"])
    first = next((i for i, s in enumerate(out) if not isinstance(s, Text)), len(out))
    assert text(out[:first]) == content[: len(text(out[:first]))]
    assert all(call.error is None for call in calls(out))
