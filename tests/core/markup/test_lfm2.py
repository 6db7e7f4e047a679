"""LFM2's calls between <|tool_call_start|> and <|tool_call_end|>: Python syntax, or JSON."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text

S, E = "<|tool_call_start|>", "<|tool_call_end|>"

CASES = {
    "vLLM's example, text after": (
        f'{S}[get_weather(city="Paris")]{E}The weather in Paris is sunny.',
        [Call("get_weather", {"city": "Paris"})],
        "The weather in Paris is sunny.",
    ),
    "parallel, Python literals, text before": (
        f"Checking. {S}[get_weather(city='Köln', days=3, metric=True, note=None, "
        f"tags=['a', \"b\"], options={{'deep': (1, [2])}}), get_time()]{E}",
        [
            Call(
                "get_weather",
                {
                    "city": "Köln",
                    "days": 3,
                    "metric": True,
                    "note": None,
                    "tags": ["a", "b"],
                    "options": {"deep": [1, [2]]},
                },
            ),
            Call("get_time", {}),
        ],
        "Checking. ",
    ),
    "a function the request did not declare is still a call behind the tags": (
        f'{S}[search_web(query="lfm2")]{E}',
        [Call("search_web", {"query": "lfm2"})],
        "",
    ),
    "JSON form (system prompt: Output function calls as JSON)": (
        f'{S}[{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}, '
        f'{{"name": "get_time", "arguments": {{}}}}]{E}Done.',
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "Done.",
    ),
    "no end token before the stream ends": (
        f"{S}[get_time()]",
        [Call("get_time", {})],
        "",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_lfm2_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["lfm2"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    "content",
    [
        f"{S} opens a call.",
        f"{S}[1, 2]{E}",
        f"{S}[get weather()]{E}",
        "[get_weather(city='Paris')]",  # the bare list is the pythonic dialect's
    ],
)
def test_lfm2_other_content_is_untouched(content):
    for chunks in cuts(content).values():
        assert run(chunks, ["lfm2"]) == [Text(content)]


def test_lfm2_values_are_never_evaluated():
    # Issue 24 item 4: the call that is not a literal is given back as its text (was: a
    # call closed with an error holding the value's text).
    markup = f"{S}[get_weather(city=__import__('os').getcwd())]{E}"
    assert run([markup], ["lfm2"]) == [Text(markup)]
