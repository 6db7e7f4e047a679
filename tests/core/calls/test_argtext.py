"""A call's kept argument text answers its questions as the whole text would, however it came
in pieces and whenever it is asked (proxy/core/calls/argtext.py)."""

from __future__ import annotations

import json
from itertools import pairwise

from hypothesis import example, given
from hypothesis import strategies as st

from proxy.core.calls.argtext import ArgText
from proxy.core.calls.jsontext import complete_json, json_prefix_end

# JSON's structure and whitespace (including what str.strip takes but JSON does not), often
JSONISH = st.text(alphabet=st.sampled_from('{}[]"\\:,  \n\t\u00a0\u2028ab1'), max_size=12)
VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='ab"\\{}[] \n', max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=8,
)


@st.composite
def pieces(draw: st.DrawFn) -> list[str]:
    """Text cut anywhere: JSON-like noise, or a real value's text with whitespace around it."""
    if draw(st.booleans()):
        text = "".join(draw(st.lists(JSONISH, max_size=6)))
    else:
        value = draw(st.dictionaries(st.text(max_size=3), VALUES) | st.lists(VALUES))
        indent = draw(st.sampled_from([None, 1]))
        text = draw(st.sampled_from(["", " ", "\n"])) + json.dumps(value, indent=indent)
        text += draw(st.sampled_from(["", " ", "\u00a0", "\n\n", " x", "}"]))
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in pairwise(bounds)]


def answers(text: str, fragment: str) -> tuple[object, str, int | None]:
    return complete_json(text), text.rstrip()[-1:], json_prefix_end(text, fragment)


@given(pieces(), st.lists(st.booleans(), max_size=10), JSONISH | st.just('{"a": 1}'))
@example(['{"a": "\\', '"}'], [True, True], "")  # an escape cut from what it escapes
@example(["{} ", "\u00a0"], [True, True], "{}")  # whitespace only str.strip knows
@example(["[1]", " ]"], [True, True], "[1]")  # more after the value closed
def test_answers_equal_those_of_the_whole_text(
    parts: list[str], ask: list[bool], fragment: str
) -> None:
    kept = ArgText()
    for i, part in enumerate(parts):
        kept.append(part)
        if i < len(ask) and ask[i]:  # asked after some pieces and not others
            text = "".join(parts[: i + 1])
            assert (kept.complete(), kept.last_char(), kept.prefix_end(fragment)) == answers(
                text, fragment
            )
    text = "".join(parts)
    assert kept.text() == text
    assert len(kept) == len(text)
    assert bool(kept) == bool(text)
    assert (kept.complete(), kept.last_char(), kept.prefix_end(fragment)) == answers(text, fragment)


def test_prefix_of_a_text_with_long_whitespace_is_read_to_its_end() -> None:
    kept = ArgText()
    for part in ['{"a":', " " * 500, "1", " " * 500]:
        kept.append(part)
    # the beginning read first (a little over the fragment's length) is all whitespace
    assert kept.prefix_end('{"a": 1, "b": 2}') == 7
