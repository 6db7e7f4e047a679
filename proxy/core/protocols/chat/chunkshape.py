"""A chunk's bytes around one string value, to recognise the next chunk without parsing it.

Servers write every text or argument delta of a stream with the same envelope: only the
string changes (``..."delta":{"content":"<text>"},"logprobs":null,...``). Once a chunk took
one of the normalizer's hot paths, a later chunk whose bytes are the same around one JSON
string is that chunk with another text, and the hot path's checks on the text alone decide
it. An envelope that changes (a new ``created`` second) is simply not recognised, and the
chunk is parsed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

import orjson

# Bytes a plainly spelled JSON string cannot hold: a quote or backslash (an escape, whose text
# differs from its bytes) and control characters (not valid JSON at all).
_NOT_PLAIN: Final = re.compile(rb'["\\\x00-\x1f]')


@dataclass(frozen=True, slots=True)
class ChunkShape:
    prefix: bytes  # the chunk's bytes up to the string's opening quote, included
    suffix: bytes  # from its closing quote on

    @classmethod
    def around(cls, data: bytes, key: bytes, text: str) -> ChunkShape | None:
        """The shape of ``data`` around the value ``text`` of its one ``key`` member, when the
        value is spelled the way orjson spells it and ``"key":"`` appears once; else None."""
        marker = b'"' + key + b'":"'
        start = data.find(marker)
        if start < 0 or data.find(marker, start + 1) >= 0:
            return None
        value = _spelled(text)
        begin = start + len(marker)
        end = begin + len(value)
        if data[begin:end] != value or data[end : end + 1] != b'"':
            return None
        return cls(data[:begin], data[end:])

    def framed(self, before: bytes, after: bytes) -> ChunkShape | None:
        """This shape with ``before`` and ``after`` around it (an event's framing), when
        neither it nor they hold a line end (a one-line event, which its text, spelled,
        cannot break); else None."""
        if b"\n" in self.prefix or b"\n" in self.suffix:
            return None
        return ChunkShape(before + self.prefix, self.suffix + after)

    def with_text(self, text: str) -> bytes:
        """The chunk of this shape around ``text``, spelled as ``around`` expects it."""
        return self.prefix + _spelled(text) + self.suffix

    def text(self, data: bytes) -> str | None:
        """The string ``data`` holds in this shape, when it is this shape around one JSON
        string; else None."""
        end = len(data) - len(self.suffix)
        if (
            end < len(self.prefix)
            or not data.startswith(self.prefix)
            or not data.endswith(self.suffix)
        ):
            return None
        value = data[len(self.prefix) : end]
        if _NOT_PLAIN.search(value) is None:
            try:
                return value.decode()
            except UnicodeDecodeError:
                return None
        # Escapes (argument text is full of \"): the value must be one JSON string by itself,
        # so that no quote in it ends the string early.
        try:
            text = orjson.loads(b'"' + value + b'"')
        except orjson.JSONDecodeError:
            return None
        return text if isinstance(text, str) else None


def _spelled(text: str) -> bytes:
    """``text`` as the inside of a JSON string, the way orjson writes it."""
    return orjson.dumps(text)[1:-1]
