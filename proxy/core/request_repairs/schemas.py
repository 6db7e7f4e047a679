"""Tool parameter schemas a template's type mapping can read.

Some templates turn each parameter's ``type`` into a type name (Command-R's
``json_to_python_type``, Seed-OSS's ``py_type``); under llama.cpp's template engine a type list
(``["string", "null"]``) or a union of primitive types (``anyOf: [{"type": "string"},
{"type": "null"}]``, which pydantic writes for every ``Optional`` field) breaks that mapping.
For such a template a type list becomes its first type other than ``"null"``, and a union
whose members are all primitive types becomes its first member other than ``null`` (its
``description`` and the other keys of the schema kept). What is lost: that the value may also
be null or of the other types; the model sees only the first.
"""

from __future__ import annotations

from typing import Any, Final

PRIMITIVE: Final = frozenset({"string", "number", "integer", "boolean", "null"})
_UNIONS: Final = ("anyOf", "oneOf")
#: keys under which a schema holds other schemas, by kind
_SCHEMA_MAPS: Final = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES: Final = ("items", "additionalProperties", "not", "contains")


class Simplified:
    """What :func:`simplify` changed: type lists and unions reduced."""

    __slots__ = ("type_lists", "unions")

    def __init__(self) -> None:
        self.type_lists = 0
        self.unions = 0


def _primitive_member(schema: object) -> bool:
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    return (
        isinstance(kind, str)
        and kind in PRIMITIVE
        and not any(key in schema for key in (*_SCHEMA_MAPS, *_SCHEMA_LISTS, *_SCHEMA_VALUES))
    )


def simplify(schema: Any, seen: Simplified) -> Any:
    """The schema with every type list and union of primitives reduced; the very object when
    nothing in it changes."""
    if isinstance(schema, list):
        items = [simplify(item, seen) for item in schema]
        return schema if all(a is b for a, b in zip(items, schema, strict=True)) else items
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] | None = None

    def put(key: str, value: Any) -> None:
        nonlocal out
        if out is None:
            out = dict(schema)
        out[key] = value

    for key in _SCHEMA_MAPS:
        inner = schema.get(key)
        if isinstance(inner, dict):
            fixed = {name: simplify(value, seen) for name, value in inner.items()}
            if any(fixed[name] is not inner[name] for name in inner):
                put(key, fixed)
    for key in (*_SCHEMA_LISTS, *_SCHEMA_VALUES):
        if key in schema:
            fixed_value = simplify(schema[key], seen)
            if fixed_value is not schema[key]:
                put(key, fixed_value)
    current = out if out is not None else schema
    kind = current.get("type")
    if isinstance(kind, list) and kind:
        seen.type_lists += 1
        put("type", next((t for t in kind if t != "null"), kind[0]))
    for key in _UNIONS:
        members = (out if out is not None else schema).get(key)
        if isinstance(members, list) and members and all(_primitive_member(m) for m in members):
            seen.unions += 1
            chosen = next((m for m in members if m.get("type") != "null"), members[0])
            merged = dict(out if out is not None else schema)
            del merged[key]
            for name, value in chosen.items():
                merged.setdefault(name, value)
            out = merged
    return out if out is not None else schema
