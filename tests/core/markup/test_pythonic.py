"""Pythonic call lists (Llama 3.2 / Llama 4): literals read, never run."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from proxy.core.markup.pythonic import literal_json
from tests.core.markup.helpers import Call, calls, cuts, run, text

CASES = {
    "single": ('[get_weather(city="Paris")]', [Call("get_weather", {"city": "Paris"})], ""),
    "parallel, mixed literals, text after": (
        "[get_weather(city='Köln', days=3, metric=True, ratio=-0.5, note=None, "
        "tags=['a', \"b\"], options={'deep': (1, [2])}), get_time()]\nDone.",
        [
            Call(
                "get_weather",
                {
                    "city": "Köln",
                    "days": 3,
                    "metric": True,
                    "ratio": -0.5,
                    "note": None,
                    "tags": ["a", "b"],
                    "options": {"deep": [1, [2]]},
                },
            ),
            Call("get_time", {}),
        ],
        "\nDone.",
    ),
    "escaped quotes, commas and parens inside strings": (
        '[get_weather(city="a \\"b\\", (c)", note=\'it\\\'s\')]',
        [Call("get_weather", {"city": 'a "b", (c)', "note": "it's"})],
        "",
    ),
    "triple-quoted string and JSON literals": (
        '[get_weather(city="""multi\nline""", metric=true, note=null)]',
        [Call("get_weather", {"city": "multi\nline", "metric": True, "note": None})],
        "",
    ),
    "Llama 4 python tags, whitespace first": (
        "  <|python_start|>[get_time()]<|python_end|>",
        [Call("get_time", {})],
        "  ",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_pythonic_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["pythonic"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    "content",
    [
        "[1] A footnote.",
        "[Link](https://example.com)",
        "[see(a=1)] is not a declared function",
        "Call [get_weather(city='Paris')] later",  # not at the start
    ],
)
def test_pythonic_other_content_is_untouched(content):
    for chunks in cuts(content).values():
        assert run(chunks, ["pythonic"]) == [Text(content)]


@pytest.mark.parametrize(
    "value", ["__import__('os').system('true')", "open('/etc/passwd')", "1 if x else 2", "{1, 2}"]
)
def test_pythonic_values_are_never_evaluated(value):
    markup = f"[get_weather(city={value})]"
    # Nothing was run to get a value; issue 24 item 4: the call that is not a literal is
    # given back as its text (was: a call closed with an error, holding the value's text).
    assert run([markup], ["pythonic"]) == [Text(markup)]


def test_literal_json_accepts_only_plain_data():
    assert literal_json("(1, 'a', {'k': [True, None]})") == '[1,"a",{"k":[true,null]}]'
    with pytest.raises(Exception, match=r"literal|JSON"):
        literal_json("float('nan')")


def test_pythonic_unbalanced_bracket_breaks_the_same_however_the_value_is_cut():
    """Found by the contract test: a `{` cut from the rest of its broken value used to change
    both the partial value and the text given back."""
    content = '[get_weather(city={"Zürich", days=2), get_time()]'
    whole = run([content], ["pythonic"])
    assert run([content[:19], content[19:]], ["pythonic"]) == whole
    assert whole == [Text(content)]  # issue 24 item 4: the broken list is text, whole
