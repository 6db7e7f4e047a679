"""The hot path of a call streamed out of markup sends what the full path would, byte for
byte, and counts the same held text: ``HotPaths.take_markup_args`` (chat/fast.py) on a
parsed chunk, and a later chunk that repeats its bytes around another text without being
parsed.

Each stream is normalized three times: as it is, with the markup hot path refusing every
chunk (so that ``process`` handles them all, and no chunk is taken for a markup repeat), and
with every fast path off (``fast=False``); the client's bytes must be the same, and the text
counted as held the same as with the markup hot path refused. (Not as with every fast path
off: a plain content delta after a markup block closed takes the content hot path, which
leaves the text the extractor held counted until a later delta, where ``process`` lets it go
at once; tests/core/protocols/chat/test_fast_paths.py holds the bytes and the cap's byte.) Streams are written as servers write them (compact JSON, in
which repeats are recognised) and with spaces (in which they are not).
"""

from __future__ import annotations

import itertools
import json

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.core.protocols.chat.fast import HotPaths
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from tests.core.markup.helpers import tokens
from tests.support.chat_markup import ON, TOOLS, hermes, stream
from tests.support.normalizer import counting_ids, eventwise


def compact(body: bytes) -> bytes:
    """The stream with every chunk written by orjson, as llama.cpp and vLLM write them."""
    out = b""
    for event in eventwise(body):
        data = event[len(b"data: ") : -2]
        out += event if data == b"[DONE]" else b"data: " + orjson.dumps(json.loads(data)) + b"\n\n"
    return out


def drive(body: bytes, group: int, *, fast: bool = True) -> tuple[bytes, list[int]]:
    """The client's bytes, and the text counted as held after each read (``group`` events)."""
    normalizer = StreamNormalizer(
        ON, RequestInfo.from_body(TOOLS), new_id=counting_ids(), fast=fast
    )
    rewriter = ChatSSEStream(normalizer)
    out: list[bytes] = []
    held: list[int] = []
    for read in eventwise(body, group):
        out += rewriter.feed(read)
        held.append(normalizer._ctx.held + normalizer._ctx.kept)  # what a chat stream caps
    out += rewriter.close(complete=True)
    return b"".join(out), held


def both_ways(body: bytes, monkeypatch: pytest.MonkeyPatch, group: int = 1) -> tuple[int, int]:
    """Check that ``drive`` gives the same with the hot path as without it; how many chunks
    took it, and how many of those were parsed."""
    kept = parsed = 0
    keep, take = HotPaths.keep_markup_args, HotPaths.take_markup_args

    def counting_keep(self, call, text):
        nonlocal kept
        taken = keep(self, call, text)
        kept += taken
        return taken

    def counting_take(self, choice, source):
        nonlocal parsed
        pieces = take(self, choice, source)
        parsed += pieces is not None
        return pieces

    with monkeypatch.context() as patch:
        patch.setattr(HotPaths, "keep_markup_args", counting_keep)
        patch.setattr(HotPaths, "take_markup_args", counting_take)
        fast = drive(body, group)
    with monkeypatch.context() as patch:
        patch.setattr(HotPaths, "take_markup_args", lambda self, choice, source: None)
        slow = drive(body, group)
    assert fast == slow
    assert drive(body, group, fast=False)[0] == fast[0]
    return kept, parsed


LONG = '{"location": "Paris, the capital of France", "n": 3}'


@pytest.mark.parametrize("group", [1, 10])
def test_argument_strings_take_the_hot_path_and_repeats_skip_parsing(monkeypatch, group):
    body = compact(stream("Let me look.", *tokens(hermes("get_weather", LONG)), " Done."))
    kept, parsed = both_ways(body, monkeypatch, group)
    assert kept >= len(tokens("Paris, the capital of France"))
    assert parsed < kept  # the others repeated the bytes of a chunk that was parsed


def test_a_repeat_is_for_its_own_call_only(monkeypatch):
    # the second call's chunks repeat the first call's bytes, but it goes out under index 1
    calls = hermes("get_weather", LONG) + hermes("get_weather", LONG.replace("Paris", "Lyon"))
    kept, parsed = both_ways(compact(stream(*tokens(calls))), monkeypatch)
    assert parsed >= 2
    assert kept > parsed


def test_chunks_written_with_spaces_are_parsed_every_time(monkeypatch):
    kept, parsed = both_ways(stream(*tokens(hermes("get_weather", LONG))), monkeypatch)
    assert kept == parsed > 0


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
        both_ways(compact(stream("Hi.", *texts, "Hi.", *texts)), monkeypatch)
