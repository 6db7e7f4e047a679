"""Qwen3-Coder's XML-like calls, typed by the request's schema."""

from __future__ import annotations

import pytest

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import TOOLS, Call, calls, cuts, merged, run, text


def qwen(name: str, **params: str) -> str:
    """A call exactly as the template renders it."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


CASES = {
    "single typed": (
        qwen("get_weather", city="Paris", days="3", metric="True", ratio="0.5", note="None"),
        [
            Call(
                "get_weather",
                {"city": "Paris", "days": 3, "metric": True, "ratio": 0.5, "note": None},
            )
        ],
        "",
    ),
    "parallel with text around": (
        "I'll check.\n\n" + qwen("get_weather", city="Paris") + "\n" + qwen("get_time") + "\nDone",
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "I'll check.\n\n\n\nDone",
    ),
    "nested, unicode, multi-line string": (
        qwen(
            "get_weather",
            city='São Paulo\n  "centro"\n',
            tags='["a", "ü"]',
            options='{"deep": {"x": [1, null]}}',
        ),
        [
            Call(
                "get_weather",
                {
                    "city": 'São Paulo\n  "centro"\n',
                    "tags": ["a", "ü"],
                    "options": {"deep": {"x": [1, None]}},
                },
            )
        ],
        "",
    ),
    "string that looks like a number stays a string": (
        qwen("get_weather", city="42"),
        [Call("get_weather", {"city": "42"})],
        "",
    ),
    "value that fits no declared type stays text": (
        qwen("get_weather", days="three"),
        [Call("get_weather", {"days": "three"})],
        "",
    ),
    "unknown parameter and unknown function keep text": (
        qwen("lookup", q="7"),
        [Call("lookup", {"q": "7"})],
        "",
    ),
    "without the tool_call wrapper, no newlines": (
        "<function=get_weather><parameter=city>Paris</parameter><parameter=days>2</parameter></function>",
        [Call("get_weather", {"city": "Paris", "days": 2})],
        "",
    ),
    "empty value": (qwen("get_weather", city=""), [Call("get_weather", {"city": ""})], ""),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_qwen3_coder_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["qwen3_coder"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_qwen3_coder_a_call_goes_out_when_its_function_closes():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    extractor = build_extractor(["qwen3_coder"], TOOLS)
    assert extractor is not None
    got = extractor.feed("<tool_call>\n<function=get_weather>\n<parameter=city>\nNew ")
    assert got == []
    assert extractor.feed("York\n</para") == []
    assert extractor.feed("meter>\n") == []
    assert merged(extractor.feed("</function>")) == [
        CallOpen("get_weather"),
        CallArgs('{"city": "New York"}'),
        CallClose(),
    ]


def test_qwen3_coder_typed_values_go_out_complete():
    extractor = build_extractor(["qwen3_coder"], TOOLS)
    assert extractor is not None
    extractor.feed("<tool_call>\n<function=get_weather>\n<parameter=days>\n1")
    assert extractor.feed("2") == []
    assert extractor.held >= 2
    assert extractor.feed("\n</parameter>") == []  # issue 24 item 4: held to the call's end
    assert extractor.held == len(
        "<tool_call>\n<function=get_weather>\n<parameter=days>\n12\n</parameter>"
    )


def test_qwen3_coder_falls_back_to_hermes_under_auto():
    markup = '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>'
    assert calls(run([markup])) == [Call("get_time", {})]


def test_qwen3_coder_truncated_call_is_given_back_as_text():
    # Issue 24 item 4: a markup call is held until its markup is complete, and markup that
    # breaks inside a call is given back as the text it was (before: the call streamed and was
    # closed with an error).
    markup = "<tool_call>\n<function=get_weather>\n<parameter=days>\n3"
    assert run(cuts(markup)["tokens"], ["qwen3_coder"]) == [Text(markup)]


def test_qwen3_coder_prose_about_tags_is_content():
    markup = "Wrap calls in <tool_call> and <function=NAME> tags."
    assert run([markup], ["qwen3_coder"]) == [Text(markup)]
