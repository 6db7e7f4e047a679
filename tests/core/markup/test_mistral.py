"""Mistral's ``[TOOL_CALLS]``: the JSON list of older templates, ``NAME[ARGS]`` of newer ones."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text

CASES = {
    "list, single, with id (v0.3)": (
        '[TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
    "list, parallel, text before": (
        'Sure.[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, '
        '{"name": "get_time", "arguments": {}}]',
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "Sure.",
    ),
    "args form, parallel, text around": (
        'Checking.[TOOL_CALLS]get_weather[ARGS]{"city": "Köln", "options": {"q": "a \\"b\\""}}'
        "[TOOL_CALLS]get_time[ARGS]{} ok",
        [Call("get_weather", {"city": "Köln", "options": {"q": 'a "b"'}}), Call("get_time", {})],
        "Checking. ok",
    ),
    "args form with a call id (v11)": (
        '[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}',
        [Call("get_weather", {"city": "Paris"}, id="a1b2c3d4e")],
        "",
    ),
    "name then object without [ARGS]": (
        '[TOOL_CALLS]get_weather{"city": "Paris"}',
        [Call("get_weather", {"city": "Paris"})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_mistral_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["mistral"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    "markup",
    ["The [TOOL_CALLS] token starts a call.", "[TOOL_CALLS] []", "[TOOL_CALLS]get_weather(city)"],
)
def test_mistral_prose_mentioning_the_marker_is_content(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["mistral"]) == [Text(markup)]
