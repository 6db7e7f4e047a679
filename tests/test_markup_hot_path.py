"""The hot path of a call streamed out of markup (``ChoiceNormalizer.take_markup_args``) sends
what the full path would, byte for byte, and counts the same held text.

Each stream is normalized twice, once as it is and once with the hot path refusing every
chunk (so that ``process`` handles them all); the client's bytes must be the same.
"""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.choice import ChoiceNormalizer
from proxy.normalize import RequestInfo, StreamNormalizer
from proxy.rewriter import SSERewriter
from tests.dialects.helpers import tokens
from tests.normalize_helpers import counting_ids, eventwise
from tests.test_normalize_dialects import ON, TOOLS, hermes, stream


def drive(body: bytes) -> tuple[bytes, list[int]]:
    """The client's bytes, and the text counted as held after each read (one event each)."""
    normalizer = StreamNormalizer(ON, RequestInfo.from_body(TOOLS), new_id=counting_ids())
    rewriter = SSERewriter(normalizer, max_event_bytes=1 << 20)
    out: list[bytes] = []
    held: list[int] = []
    for read in eventwise(body):
        out += rewriter.feed(read)
        held.append(normalizer._ctx.held)
    out += rewriter.close(complete=True)
    return b"".join(out), held


def both_ways(
    body: bytes, monkeypatch: pytest.MonkeyPatch
) -> tuple[tuple[bytes, list[int]], tuple[bytes, list[int]], int]:
    """What ``drive`` gives with the hot path, without it, and how many chunks took it."""
    taken = 0
    real = ChoiceNormalizer.take_markup_args

    def counting(self, choice, source):  # type: ignore[no-untyped-def]
        nonlocal taken
        pieces = real(self, choice, source)
        taken += pieces is not None
        return pieces

    with monkeypatch.context() as patch:
        patch.setattr(ChoiceNormalizer, "take_markup_args", counting)
        fast = drive(body)
    with monkeypatch.context() as patch:
        patch.setattr(ChoiceNormalizer, "take_markup_args", lambda self, choice, source: None)
        slow = drive(body)
    return fast, slow, taken


def test_streamed_argument_strings_take_the_hot_path_and_change_nothing(monkeypatch):
    markup = hermes("get_weather", '{"location": "Paris, the capital of France", "n": 3}')
    body = stream("Let me look.", *tokens(markup), " Done.")
    fast, slow, taken = both_ways(body, monkeypatch)
    assert fast == slow
    assert taken >= len(tokens("Paris, the capital of France")) - 2


# argument values with the characters that end or escape a JSON string, cut anywhere
_values = st.text(alphabet='ab "\\/\né€', max_size=16)


@settings(max_examples=40, deadline=None)
@given(value=_values, ascii=st.booleans(), data=st.data())
def test_any_cut_of_any_string_gives_the_same_bytes(value, ascii, data):
    markup = hermes("get_weather", json.dumps({"location": value}, ensure_ascii=ascii))
    points = data.draw(st.lists(st.integers(0, len(markup)), max_size=10).map(sorted))
    bounds = [0, *points, len(markup)]
    texts = [markup[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    with pytest.MonkeyPatch.context() as monkeypatch:
        fast, slow, _ = both_ways(stream("Hi.", *texts), monkeypatch)
    assert fast == slow
