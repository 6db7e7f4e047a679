"""Hermes markup as the Qwen2.5/Qwen3 templates write it, and as Ollama leaked it."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Text
from tests.core.markup.helpers import Call, calls, cuts, merged, run, text

CASES = {
    "single": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
    "parallel with text around": (
        'Let me check both.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
        '\n</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>\nOK.',
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "Let me check both.\n\n\nOK.",
    ),
    "nested and unicode": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "東京", '
        '"options": {"units": ["°C", "hPa"], "deep": {"x": [1, {"y": null}]}}}}\n</tool_call>',
        [
            Call(
                "get_weather",
                {
                    "city": "東京",
                    "options": {"units": ["°C", "hPa"], "deep": {"x": [1, {"y": None}]}},
                },
            )
        ],
        "",
    ),
    "escaped quotes and braces in strings": (
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "say \\"}{\\" \\\\ <tool_call>"}}'
        "\n</tool_call>",
        [Call("get_weather", {"city": 'say "}{" \\ <tool_call>'})],
        "",
    ),
    "empty and missing arguments": (
        '<tool_call>{"name": "get_time", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "get_time"}</tool_call>',
        [Call("get_time", {}), Call("get_time", {})],
        "",
    ),
    "name after arguments, extra members": (
        '<tool_call>\n{"id": 0, "arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
    "arguments as a JSON string": (
        '<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}</tool_call>',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_hermes_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["hermes"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


def test_hermes_call_goes_out_when_its_object_is_complete():
    # Issue 24 item 4: a markup call is held until its object is complete (before: opened
    # at its name, its arguments streamed as they came).
    from proxy.core.markup import build_extractor
    from tests.core.markup.helpers import TOOLS

    extractor = build_extractor(["hermes"], TOOLS)
    assert extractor is not None
    assert extractor.feed("Hi <tool_") == [Text("Hi ")]
    assert extractor.feed('call>\n{"name": "get_wea') == []
    assert extractor.feed('ther", ') == []
    assert extractor.feed('"arguments": {"city": "Par') == []
    assert extractor.held == len('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par')
    assert merged(extractor.feed('is"}}')) == [
        CallOpen("get_weather"),
        CallArgs('{"city": "Paris"}'),
        CallClose(),
    ]
    assert extractor.held == 0


def test_ollama_recording_of_a_leaked_hermes_call_is_held_not_shown():
    # ollama PR #5915: "<tool_call>", "\n", "{\"", "id", "\":" ... the capture stops there.
    from proxy.core.markup import build_extractor
    from tests.core.markup.helpers import TOOLS

    extractor = build_extractor(["hermes"], TOOLS)
    assert extractor is not None
    shown = [s for chunk in ["<tool_call>", "\n", '{"', "id", '":'] for s in extractor.feed(chunk)]
    assert shown == []
    assert extractor.held == len('<tool_call>\n{"id":')
    # The stream ends there: nothing was a call, so everything comes back as content.
    assert extractor.close() == [Text('<tool_call>\n{"id":')]


@pytest.mark.parametrize(
    "markup",
    [
        "<tool_call>\nI think I should call a tool.\n</tool_call>",
        '<tool_call>{"name": 42, "arguments": {}}</tool_call>',
        '<tool_call>{"arguments": {"city": "Paris"}}</tool_call>',
        "Use <tool_call> tags to call tools.",
    ],
)
def test_hermes_malformed_before_the_name_is_content(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["hermes"]) == [Text(markup)]


def test_hermes_broken_after_the_name_is_content():
    # Issue 24 item 4: markup broken or cut inside a call is given back as the text it was
    # (before: a call closed with an error holding what arrived).
    markup = '<tool_call>{"name": "get_weather", "arguments": {"city": "Par'
    for chunks in cuts(markup).values():
        assert run(chunks, ["hermes"]) == [Text(markup)]
