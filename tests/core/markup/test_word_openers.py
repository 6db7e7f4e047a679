"""Openers made of plain words (harmony with its special tokens stripped): they hold back no
ordinary text, and still open calls in content that starts the way such a stream does."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.markup import build_extractor
from proxy.core.markup.base import Text
from tests.core.markup.helpers import TOOLS, Call, calls, cuts, run, text


@pytest.mark.parametrize("token", [" basic", " a", " data", " co", " ass", " commentary"])
def test_text_ending_like_a_word_opener_goes_out_in_the_same_feed(token):
    extractor = build_extractor(["auto"], TOOLS)
    assert extractor is not None
    assert extractor.feed("Hello") == [Text("Hello")]
    assert extractor.passes(token)  # the normalizer's fast path may skip it
    assert extractor.feed(token) == [Text(token)]
    assert extractor.held == 0


WEATHER = 'commentary to=functions.get_weather json{"city": "Paris"}'
LEAKS = {
    "the channel word first": (WEATHER, ""),
    "analysis, then the call": (
        "analysisThe user wants the weather. Use get_weather.assistant" + WEATHER,
        "analysisThe user wants the weather. Use get_weather.",
    ),
    "a commentary preamble, then the call": (
        "commentaryLet me check that.assistant" + WEATHER,
        "commentaryLet me check that.",
    ),
    "the role first": (
        "assistantanalysisNeed a call.assistant" + WEATHER,
        "assistantanalysisNeed a call.",
    ),
}


@pytest.mark.parametrize("cut", ["whole", "tokens", "chars"])
@pytest.mark.parametrize("leak", LEAKS)
def test_a_stripped_harmony_stream_still_gives_its_call(leak, cut):
    content, before = LEAKS[leak]
    out = run(cuts(content)[cut])
    assert calls(out) == [Call("get_weather", {"city": "Paris"})]
    assert text(out) == before


@pytest.mark.parametrize("leak", LEAKS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_a_stripped_harmony_stream_gives_the_same_segments_however_cut(leak, data):
    content = LEAKS[leak][0]
    points = data.draw(st.lists(st.integers(0, len(content)), max_size=12).map(sorted))
    pieces = [content[a:b] for a, b in pairwise([0, *points, len(content)])]
    assert run(pieces) == run([content])


def test_word_markup_past_the_start_of_other_content_is_text():
    # the content did not begin like a stripped harmony stream: the words are prose
    content = "Here is how it looks: " + WEATHER
    for chunks in cuts(content).values():
        assert run(chunks) == [Text(content)]
