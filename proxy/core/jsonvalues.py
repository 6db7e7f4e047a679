"""JSON values as the whole core reads and writes them: one type, orjson in and out, and the
marker for text that is no JSON value.

Every protocol carries the objects it does not know field by field, so they stay plain dicts
(``JSONObject``): a schema would only get in the way. The name is not ``json`` so that no
import of this module reads as the standard library's (which ruff bans in favour of orjson).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

JSONObject = dict[str, Any]

_MAX_WRITE_DEPTH: Final = 254


class _Invalid:
    """The result of parsing text that is not one complete JSON value."""

    def __repr__(self) -> str:
        return "INVALID"


INVALID: Final = _Invalid()


def loads(data: bytes | str) -> object:
    """The JSON value, or INVALID (orjson also rejects invalid UTF-8)."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return INVALID


def dumps(value: object) -> bytes:
    return orjson.dumps(value)


def dumps_text(value: object) -> str:
    """``value`` as JSON text (the argument text of a call sent as an object, Q19)."""
    return orjson.dumps(value).decode()


def writable(value: object, data: bytes) -> bool:
    """Whether ``value`` (parsed from ``data``) can be written back: orjson reads nesting
    deeper than it writes (254 levels). Counting brackets settles almost every value."""
    if data.count(b"{") + data.count(b"[") <= _MAX_WRITE_DEPTH:
        return True
    try:
        orjson.dumps(value)
    except orjson.JSONEncodeError:
        return False
    return True
