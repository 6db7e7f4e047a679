"""The contract of proxy/core/markup/base.py, checked for every registered dialect with hypothesis.

* The segments do not depend on how the text is cut (Text merged, argument fragments joined).
* Text with no call in it comes out byte-identical; markers that lead nowhere are content.
* Malformed or truncated markup is released unchanged until a call opens; calls that open are
  always closed, and what the segments say is a well-formed sequence.
* Joined argument fragments parse to the same object however the text was cut.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.core.markup import DIALECTS
from proxy.core.markup.base import CallOpen, Text
from tests.core.markup.examples import SAMPLES
from tests.core.markup.helpers import calls, cut, run, text

ALL_MARKERS = sorted(
    {m for cls in DIALECTS.values() for m in (*cls.openers, *cls.word_openers, *cls.start_openers)},
    key=len,
)


@pytest.mark.parametrize("name", SAMPLES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_segments_do_not_depend_on_the_cuts(name, data):
    sample = SAMPLES[name]
    whole = run([sample], [name])
    pieces = run(cut(data, sample), [name])
    assert pieces == whole
    assert calls(pieces) == calls(whole)  # the joined arguments parse to the same objects
    assert calls(whole)
    assert all(call.error is None for call in calls(whole))


# Text made of the characters markup is made of, plus pieces of real markers and the words
# that make word openers count anywhere.
_fragments = st.sampled_from(
    [m[: len(m) // 2] for m in ALL_MARKERS]
    + [m[len(m) // 2 :] for m in ALL_MARKERS]
    + sorted({word for cls in DIALECTS.values() for word in cls.word_starts})
)
_noise = st.lists(
    st.one_of(st.text(alphabet='<|>[]{}()"=: \n_aéTOLCS▁｜', max_size=6), _fragments), max_size=12
).map("".join)


@settings(max_examples=300, deadline=None)
@given(content=_noise, data=st.data())
@example(content="<tool_call", data=None)
@example(content="[TOOL_CALLS", data=None)
def test_text_without_calls_comes_out_byte_identical(content, data):
    chunks = cut(data, content) if data is not None else [content]
    out = run(chunks)
    if not any(isinstance(s, CallOpen) for s in out):
        assert out == ([Text(content)] if content else [])


@pytest.mark.parametrize("name", SAMPLES)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_truncated_markup_is_content_until_a_call_opens(name, data):
    sample = SAMPLES[name]
    prefix = sample[: data.draw(st.integers(0, len(sample)))]
    out = run(cut(data, prefix), [name])
    found = calls(out)  # well-formed even when cut short
    if not found:
        assert text(out) == prefix
    else:
        first = next(i for i, s in enumerate(out) if isinstance(s, CallOpen))
        assert prefix.startswith(text(out[:first]))  # content before the call, exactly


@pytest.mark.parametrize("name", SAMPLES)
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_mutated_markup_fails_open(name, data):
    sample = SAMPLES[name]
    at = data.draw(st.integers(0, len(sample) - 1))
    change = data.draw(st.sampled_from(["drop", "insert", "replace"]))
    char = data.draw(st.sampled_from(list('<>|{}[]"x ,:')))
    if change == "drop":
        mutated = sample[:at] + sample[at + 1 :]
    elif change == "insert":
        mutated = sample[:at] + char + sample[at:]
    else:
        mutated = sample[:at] + char + sample[at + 1 :]
    out = run(cut(data, mutated), [name])
    assert run([mutated], [name]) == out
    if not calls(out):
        assert text(out) == mutated


def _call_ends(content: str, name: str) -> list[int]:
    """Where in ``content`` the markup of each call it gives ends: the shortest prefix that
    gives as many calls."""
    ends: list[int] = []
    for n in range(len(content) + 1):
        if len(calls(run([content[:n]], [name]))) > len(ends):
            ends.append(n)
    return ends


def _is_whole_or_text(content: str, name: str, ends: list[int]) -> None:
    """Issue 24 item 4: markup that breaks or is cut inside a call never yields that call,
    nor part of the call plus part of its text. Every call that comes out is complete (none
    closed with an error) and is the call the markup up to its end gives; what comes after
    it is the input after it as it was, but for the end of its block (a closing tag)."""
    out = run([content], [name])
    end = ends[len(calls(out)) - 1] if calls(out) else 0
    assert all(call.error is None for call in calls(out))
    before = run([content[:end]], [name])
    assert calls(before) == calls(out)
    assert text(out).startswith(text(before))
    after = text(out)[len(text(before)) :]
    assert content[end:].endswith(after)
    if not calls(out):
        assert text(out) == content


@pytest.mark.parametrize("name", SAMPLES)
def test_markup_cut_anywhere_is_whole_calls_then_its_text(name):
    sample = SAMPLES[name]
    ends = _call_ends(sample, name)
    for length in range(len(sample) + 1):
        _is_whole_or_text(sample[:length], name, ends)


@pytest.mark.parametrize("name", SAMPLES)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_broken_markup_is_whole_calls_then_its_text(name, data):
    sample = SAMPLES[name]
    at = data.draw(st.integers(0, len(sample) - 1))
    char = data.draw(st.sampled_from(list('<>|{}[]"x ,:')))
    mutated = sample[:at] + char + sample[at + 1 :]
    out = run(cut(data, mutated), [name])
    # Issue 24 item 4: a call that breaks is given back as text, never closed with an error
    assert all(call.error is None for call in calls(out))
    assert out == run([mutated], [name])
    if not calls(out):
        assert text(out) == mutated
