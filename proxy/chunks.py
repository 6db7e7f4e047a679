"""Chat-completion chunks at the edge: orjson in and out, and cheap looks at raw bytes.

Chunks stay plain dicts (``JSONObject``): the normalizer must carry every field it does not
know, so a schema would only get in the way. The byte checks let the hot path decide whether
an event needs ``orjson.loads`` at all; they may answer "maybe" for bytes that turn out not to
matter (a parse then shows nothing to do), never "no" for bytes that do.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final

import orjson

JSONObject = dict[str, Any]


class _Invalid:
    """The result of parsing text that is not one complete JSON value."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()
_WS: Final = b" \t\r\n"


def loads(data: bytes | str) -> object:
    """The JSON value, or INVALID (orjson also rejects invalid UTF-8)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return INVALID


def dumps(value: object) -> bytes:
    return orjson.dumps(value)


def dumps_text(value: object) -> str:
    """Argument text for a value sent as an object (Q19)."""
    return orjson.dumps(value).decode()


def complete_json(text: str) -> object:
    """The value when ``text`` is exactly one complete JSON object or array, else INVALID.

    A cheap look at the first and last significant characters comes first, so partial
    argument text (almost every fragment) costs no parse.
    """
    stripped = text.strip()
    if not stripped or (stripped[0], stripped[-1]) not in (("{", "}"), ("[", "]")):
        return INVALID
    return loads(stripped)


def _value_starts(data: bytes, key: bytes) -> Iterator[int]:
    """Where the value of each ``"key":`` in ``data`` begins (``key`` includes its quotes)."""
    start = 0
    end = len(data)
    while (i := data.find(key, start)) >= 0:
        j = i + len(key)
        start = j
        while j < end and data[j] in _WS:
            j += 1
        if j >= end or data[j] != 0x3A:  # not followed by ':', so not a key
            continue
        j += 1
        while j < end and data[j] in _WS:
            j += 1
        yield j


def has_non_null(data: bytes, key: bytes) -> bool:
    """True when some ``"key":`` in ``data`` has a value other than null."""
    return any(not data.startswith(b"null", j) for j in _value_starts(data, key))


def has_text(data: bytes, key: bytes) -> bool:
    """True when some ``"key":`` in ``data`` has a non-empty string value."""
    return any(
        data.startswith(b'"', j) and not data.startswith(b'""', j) for j in _value_starts(data, key)
    )
