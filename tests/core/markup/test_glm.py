"""GLM-4.5/4.6/4.7 ``<arg_key>``/``<arg_value>`` calls, typed by the schema."""

from __future__ import annotations

import pytest

from proxy.core.markup.base import Text
from tests.core.markup.helpers import Call, calls, cuts, run, text


def glm(name: str, sep: str = "\n", **params: str) -> str:
    body = "".join(
        f"{sep}<arg_key>{k}</arg_key>{sep}<arg_value>{v}</arg_value>" for k, v in params.items()
    )
    return f"<tool_call>{name}{body}{sep}</tool_call>"


CASES = {
    "single typed (GLM-4.6 layout)": (
        glm("get_weather", city="Beijing", days="3", metric="false", ratio="1e-3"),
        [Call("get_weather", {"city": "Beijing", "days": 3, "metric": False, "ratio": 0.001})],
        "",
    ),
    "parallel with text around (GLM-4.7 layout)": (
        "Let me look.\n"
        + glm("get_weather", sep="", city="Paris")
        + glm("get_time", sep="")
        + "\nOK",
        [Call("get_weather", {"city": "Paris"}), Call("get_time", {})],
        "Let me look.\n\nOK",
    ),
    "nested, unicode, quotes": (
        glm("get_weather", city='上海 "浦东"', tags='["x", "y"]', options='{"a": {"b": [true]}}'),
        [
            Call(
                "get_weather",
                {"city": '上海 "浦东"', "tags": ["x", "y"], "options": {"a": {"b": [True]}}},
            )
        ],
        "",
    ),
    "zero arguments": ("<tool_call>get_time</tool_call>", [Call("get_time", {})], ""),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("case", CASES)
def test_glm_examples(case, cut):
    markup, expected_calls, expected_text = CASES[case]
    out = run(cuts(markup)[cut], ["glm"])
    assert calls(out) == expected_calls
    assert text(out) == expected_text


@pytest.mark.parametrize(
    "markup", ["<tool_call>just some words</tool_call>", '<tool_call>\n{"oops": 1}</tool_call>']
)
def test_glm_text_that_is_not_a_call_is_content(markup):
    for chunks in cuts(markup).values():
        assert run(chunks, ["glm"]) == [Text(markup)]
