"""``Extractor.args_run``, the hot path of a call streamed out of markup: whenever it takes a
piece, feeding that piece would have given exactly ``[CallArgs(piece)]`` and left the
extractor in the same state; whenever it refuses, it changed nothing.

Two extractors read the same cut text in lockstep, one always feeding, the other trying
``args_run`` first; their answers must agree piece by piece.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from proxy.core.markup import build_extractor
from proxy.core.markup.base import CallArgs, Extractor, Segment
from tests.core.markup.examples import SAMPLES
from tests.core.markup.helpers import TOOLS, calls, chars, cut

# the dialects whose sample writes "Zürich" as a JSON string inside the arguments
JSON_ARGS = (
    "hermes",
    "mistral",
    "llama3_json",
    "deepseek",
    "kimi_k2",
    "harmony",
    "granite",
    "hunyuan",
    "nemotron",
)

# both JSON encodings of the string: raw non-ASCII, and \\u escapes
_encoded = st.tuples(st.text(alphabet='ab é"\\/\n\t€𝄞', max_size=12), st.booleans()).map(
    lambda drawn: json.dumps(drawn[0], ensure_ascii=drawn[1])
)


def _extractor(name: str) -> Extractor:
    extractor = build_extractor([name], TOOLS)
    assert extractor is not None
    return extractor


def lockstep(name: str, pieces: list[str]) -> tuple[list[Segment], int]:
    """Everything the feeding extractor gave out, and how many pieces ``args_run`` took."""
    fed, fast = _extractor(name), _extractor(name)
    out: list[Segment] = []
    taken = 0
    for piece in pieces:
        segments = fed.feed(piece)
        if fast.args_run(piece):
            taken += 1
            assert segments == [CallArgs(piece)]
        else:
            assert fast.feed(piece) == segments
        assert fast.held == fed.held
        out += segments
    closing = fed.close()
    assert fast.close() == closing
    return out + closing, taken


@pytest.mark.parametrize("name", JSON_ARGS)
@settings(max_examples=80, deadline=None)
@given(value=_encoded, data=st.data())
@example(value=r'"say \"hi\" \\ caf\u00e9 \ud834\udd1e"', data=None)
def test_args_run_takes_only_what_feed_would_give_back_as_arguments(name, value, data):
    sample = SAMPLES[name].replace('"Zürich"', value, 1)
    pieces = chars(sample) if data is None else cut(data, sample)
    segments, _ = lockstep(name, pieces)
    [call, *_] = calls(segments)
    assert call.error is None
    assert call.args["city"] == json.loads(value)


@pytest.mark.parametrize("name", JSON_ARGS)
def test_args_run_takes_the_characters_of_an_argument_string(name):
    _, taken = lockstep(name, chars(SAMPLES[name]))
    assert taken >= len("Zürich")


@pytest.mark.parametrize(
    ("before", "piece"),
    [
        ('<tool_call>{"name": "get_weather", "arguments": {"city": "Zü', '"'),
        ('<tool_call>{"name": "get_weather", "arguments": {"city": "Zü', "\\"),
        ('<tool_call>{"name": "get_weather", "arguments": {"city": "Z\\', "u"),
        ('<tool_call>{"name": "get_weather", "arguments": {"city": "Z\\', "u00fc"),
        ('<tool_call>{"name": "get_weather", "arguments": {"city": ', "Zürich"),
        ('<tool_call>{"name": "get_', "weather"),
        ('<tool_call>{"name": "get_weather", "id": "call_', "1"),
        ('<tool_call>{"arguments": {"city": "Zü', "rich"),
        ('<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Zü', "rich"),
        ("Some text", " and more"),
    ],
)
def test_args_run_refuses_what_is_not_plain_argument_string_text(before, piece):
    extractor = _extractor("hermes")
    extractor.feed(before)
    held = extractor.held
    assert not extractor.args_run(piece)
    assert extractor.held == held
