"""ChunkShape: a later chunk is recognised by its bytes around one plainly spelled string."""

from __future__ import annotations

import orjson
from hypothesis import given
from hypothesis import strategies as st

from proxy.core.protocols.chat.chunkshape import ChunkShape


def data(text: str, created: int = 1) -> bytes:
    delta = {"content": text}
    return orjson.dumps(
        {"id": "c", "created": created, "choices": [{"index": 0, "delta": delta}], "x": None}
    )


def test_the_next_chunk_of_the_same_shape_gives_its_text() -> None:
    shape = ChunkShape.around(data("Hello"), b"content", "Hello")
    assert shape is not None
    assert shape.text(data(" world")) == " world"
    assert shape.text(data("")) == ""
    assert shape.text(data("\u00e9\u4e2d")) == "\u00e9\u4e2d"


def test_another_envelope_or_a_string_that_is_not_plain_is_not_recognised() -> None:
    shape = ChunkShape.around(data("Hello"), b"content", "Hello")
    assert shape is not None
    assert shape.text(data("x", created=2)) is None
    prefix, suffix = shape.prefix, shape.suffix
    assert shape.text(prefix + b'a","y":"b' + suffix) is None  # a quote ends the string early
    assert shape.text(prefix + b"a\\" + suffix) is None  # the backslash escapes the quote
    assert shape.text(prefix + b"\x01" + suffix) is None  # a control character: not JSON
    assert shape.text(prefix + b"\xff" + suffix) is None  # not UTF-8
    assert shape.text(prefix[:-3] + suffix) is None  # shorter than the shape


def test_escaped_text_is_decoded_as_json() -> None:
    shape = ChunkShape.around(data("Hello"), b"content", "Hello")
    assert shape is not None
    assert shape.text(data('say "hi"\n')) == 'say "hi"\n'
    assert shape.text(shape.prefix + b"\\u00e9\\/" + shape.suffix) == "\u00e9/"


def test_no_shape_around_a_repeated_or_differently_spelled_value() -> None:
    twice = b'{"content":"a","x":{"content":"a"}}'
    assert ChunkShape.around(twice, b"content", "a") is None
    assert ChunkShape.around(data("a"), b"content", "b") is None  # not the value it holds
    assert ChunkShape.around(b'{"content": "a"}', b"content", "a") is None  # other spelling
    assert ChunkShape.around(b'{"content":"\\u00e9"}', b"content", "\u00e9") is None
    assert ChunkShape.around(data('a"\\b'), b"content", 'a"\\b') is not None


@given(first=st.text(max_size=20), second=st.text(max_size=20))
def test_a_recognised_text_is_exactly_what_parsing_gives(first: str, second: str) -> None:
    shape = ChunkShape.around(data(first), b"content", first)
    assert shape is not None
    assert shape.text(data(second)) == second


@given(text=st.text(max_size=20))
def test_a_chunk_made_with_a_text_is_that_chunk_spelled_by_orjson(text: str) -> None:
    shape = ChunkShape.around(data("Hello"), b"content", "Hello")
    assert shape is not None
    assert shape.with_text(text) == data(text)
    assert shape.text(shape.with_text(text)) == text
