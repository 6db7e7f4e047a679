"""Llama 3.x bare JSON calls, at the start of the content or after ``<|python_tag|>``."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text

CASES = {
    "single, bare": (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
    "python tag, leading whitespace, unicode and nesting": (
        '\n <|python_tag|>{"name": "get_weather", "parameters": {"city": "Zürich \\"Z\\"", '
        '"options": {"list": [1, 2, {"x": "y"}]}}}',
        [Call("get_weather", {"city": 'Zürich "Z"', "options": {"list": [1, 2, {"x": "y"}]}})],
        "\n ",
    ),
    "parallel separated by semicolons, text after": (
        '{"name": "get_weather", "parameters": {"city": "Paris"}}; '
        '{"name": "get_time", "arguments": {}}\nThat is all.',
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "\nThat is all.",
    ),
    "empty parameters": ('{"name": "get_time", "parameters": {}}', [Call("get_time", {})], ""),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_llama3_json_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["llama3_json"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "Alice", "age": 30}',  # JSON the user asked for, not a call
        'Here: {"name": "get_weather", "parameters": {}}',  # not at the start
        "{not json at all}",
        '<|python_tag|>brave_search.call(query="weather")',  # Llama's built-in tool syntax
    ],
)
def test_llama3_json_other_content_is_untouched(content):
    for chunks in cuts(content).values():
        assert run(chunks, ["llama3_json"]) == [Text(content)]
