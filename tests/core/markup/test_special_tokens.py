"""The dialects that mark calls with special tokens: DeepSeek, Kimi K2, gpt-oss harmony, Granite."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text

B, S, E = "<｜tool▁calls▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁calls▁end｜>"
CB, CE = "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>"
K_SB, K_SE = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
K_CB, K_A, K_CE = "<|tool_call_begin|>", "<|tool_call_argument_begin|>", "<|tool_call_end|>"

CASES = {
    ("deepseek", "V3 fenced, parallel, text before"): (
        f"Let me see.{B}{CB}function{S}get_weather\n```json\n"
        + '{"city": "Paris", "options": {"q": "\\"x\\""}}'
        + f"\n```{CE}\n{CB}function{S}get_time\n```json\n{{}}\n```{CE}{E}",
        [Call("get_weather", {"city": "Paris", "options": {"q": '"x"'}}), Call("get_time", {})],
        "Let me see.",
    ),
    ("deepseek", "V3.1, unicode, text after"): (
        f'{B}{CB}get_weather{S}{{"city": "서울"}}{CE}{E}Done.',
        [Call("get_weather", {"city": "서울"})],
        "Done.",
    ),
    ("kimi_k2", "section, parallel, ids kept"): (
        f'I will check.{K_SB}{K_CB}functions.get_weather:0{K_A}{{"city": "Paris"}}{K_CE}'
        f"{K_CB}functions.get_time:1{K_A}{{}}{K_CE}{K_SE}",
        [
            Call("get_weather", {"city": "Paris"}, id="functions.get_weather:0"),
            Call("get_time", {}, id="functions.get_time:1"),
        ],
        "I will check.",
    ),
    ("kimi_k2", "lone call, nested"): (
        f' {K_CB}functions.get_weather:3{K_A} {{"options": {{"a": [1, {{"b": "ü"}}]}}}} {K_CE}x',
        [Call("get_weather", {"options": {"a": [1, {"b": "ü"}]}}, id="functions.get_weather:3")],
        " x",
    ),
    ("harmony", "with special tokens, after the analysis channel"): (
        "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant<|channel|>"
        'commentary to=functions.get_weather <|constrain|>json<|message|>{"city":"Paris"}<|call|>',
        [Call("get_weather", {"city": "Paris"})],
        "<|channel|>analysis<|message|>Need the weather.<|end|>",
    ),
    ("harmony", "recipient in the role part"): (
        "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>",
        [Call("get_time", {})],
        "",
    ),
    ("harmony", "special tokens stripped (Rapid-MLX#444)"): (
        'commentary to=functions.get_weather json{"city": "東京"}',
        [Call("get_weather", {"city": "東京"})],
        "",
    ),
    ("granite", "parallel, text before"): (
        'Sure. <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Boston"}}, '
        '{"name": "get_time", "arguments": {}}]',
        [Call("get_weather", {"city": "Boston"}), Call("get_time", {})],
        "Sure. ",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES, ids=" / ".join)
def test_special_token_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], [case[0]])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    ("dialect", "content"),
    [
        ("harmony", "Send it to=functions.get_weather later."),
        ("harmony", "commentary to=functions.get_weather and then prose"),
        ("harmony", "<|channel|>commentary to=browser.search<|message|>{}"),
        ("kimi_k2", f"{K_SB}{K_CB}not an id at all"),
        ("deepseek", f"{B}{CB}get weather{S}"),
        ("granite", "<|tool_call|> is Granite's marker"),
    ],
)
def test_special_token_markup_that_is_not_a_call_is_content(dialect, content):
    for chunks in cuts(content).values():
        assert run(chunks, [dialect]) == [Text(content)]
