"""The two coercions issue 25 allows, and nothing else: a string where the schema says
integer, number or boolean and the string is one (``"5"``, ``"2.5"``, ``"true"``), and a
single value where the schema says array (``"a.py"`` for ``["a.py"]``).

Only where the schema says so plainly: a ``type`` that does not also allow the value's own
type, reached through ``properties`` and ``items`` alone. A value under ``$ref``, ``anyOf``
and the like is not guessed at. The caller keeps the result only when it then fits.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_BOOLEANS: Final = {"true": True, "false": False}
_MAX_DEPTH: Final = 64


def coerced(value: object, schema: object) -> tuple[object, bool]:
    """``value`` with the coercions applied, and whether any was."""
    return _coerce(value, schema, 0)


def _coerce(value: object, schema: object, depth: int) -> tuple[object, bool]:
    if not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return value, False
    types = _types(schema)
    if types == {"array"} and not isinstance(value, list) and value is not None:
        item, _ = _coerce(value, schema.get("items"), depth + 1)
        return [item], True
    if isinstance(value, str) and types and "string" not in types:
        scalar = _scalar(value, types)
        if scalar is not None:
            return scalar, True
        return value, False
    if isinstance(value, dict):
        properties = schema.get("properties")
        if not isinstance(properties, dict):
            return value, False
        changed = False
        out: dict[str, object] = {}
        for key, item in value.items():
            out[key], did = _coerce(item, properties.get(key), depth + 1)
            changed = changed or did
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, dict):
            return value, False
        pairs = [_coerce(item, items, depth + 1) for item in value]
        if any(did for _, did in pairs):
            return [item for item, _ in pairs], True
    return value, False


def _types(schema: dict[str, object]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        names = {t for t in declared if isinstance(t, str)}
        if len(names) == len(declared):
            return names
    return set()


def _scalar(text: str, types: set[str]) -> object:
    if "boolean" in types and text in _BOOLEANS:
        return _BOOLEANS[text]
    if types & {"integer", "number"} and _NUMBER.fullmatch(text):
        try:
            number = orjson.loads(text)
        except orjson.JSONDecodeError:  # past what orjson reads (an integer over 64 bits)
            return None
        if isinstance(number, int):
            return number
        # digits alone that came back a float were past 64 bits: that float is not the text
        if isinstance(number, float) and "number" in types and not text.lstrip("-").isdigit():
            return number
    return None
