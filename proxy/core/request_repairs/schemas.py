"""Tool parameter schemas a template's type mapping can read.

Some templates turn each parameter's ``type`` into a type name, and under llama.cpp's
template engine the mapping breaks on shapes every JSON schema may have:

* a lookup table (Command-R's and Hermes' ``basic_type_map[json_spec.type]``) cannot take a
  type list (``["string", "null"]``: "Object key of unhashable type"), and Command-R's
  ``json_spec.items`` reads the mapping's own ``items`` method for an array ("Function has no
  builtins"). These are rewritten without loss: a type list becomes an ``anyOf`` of single
  types, an array's ``type`` an ``anyOf`` of the one array type, the other keywords kept
  beside it (the same instances validate, and the grammar the server builds is the same);
  the template renders such a parameter as ``Any``.
* Seed-OSS's ``py_type(spec.type)`` needs one type string on every parameter ("Cannot
  perform operation in on undefined values"): a type list becomes its first type other than
  ``"null"``, a union (``anyOf``/``oneOf``) its first member other than ``null`` (merged into
  the parameter, its description and other keys kept), and a parameter without a type gets
  the one its keywords tell (``enum`` values, ``properties``, ``items``), else ``"string"``.
  What is lost: that the value may also be null or of the other types.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from proxy.core.repairs import Repair

_UNIONS: Final = ("anyOf", "oneOf")
_SCHEMA_MAPS: Final = ("properties", "patternProperties", "$defs", "definitions")
_SCHEMA_LISTS: Final = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_VALUES: Final = ("items", "additionalProperties", "not", "contains")
_JSON_TYPES: Final = {str: "string", bool: "boolean", int: "integer", float: "number"}


def _children(schema: dict[str, Any], fix: Any) -> dict[str, Any]:
    """``schema`` with ``fix`` applied to every schema inside it (a copy only if one changed)."""
    out: dict[str, Any] | None = None
    for key in _SCHEMA_MAPS:
        inner = schema.get(key)
        if isinstance(inner, dict):
            fixed = {name: fix(value) for name, value in inner.items()}
            if any(fixed[name] is not inner[name] for name in inner):
                out = out if out is not None else dict(schema)
                out[key] = fixed
    for key in _SCHEMA_LISTS:
        inner = schema.get(key)
        if isinstance(inner, list):
            fixed_list = [fix(value) for value in inner]
            if any(a is not b for a, b in zip(fixed_list, inner, strict=True)):
                out = out if out is not None else dict(schema)
                out[key] = fixed_list
    for key in _SCHEMA_VALUES:
        inner = schema.get(key)
        if isinstance(inner, dict):
            fixed_value = fix(inner)
            if fixed_value is not inner:
                out = out if out is not None else dict(schema)
                out[key] = fixed_value
    return out if out is not None else schema


def wrapped(schema: Any, repairs: Counter[str], *, arrays: bool) -> Any:
    """Type lists (and, with ``arrays``, array types) moved into an ``anyOf``, everywhere in
    the schema; the very object when nothing changes."""
    if not isinstance(schema, dict):
        return schema
    out = _children(schema, lambda inner: wrapped(inner, repairs, arrays=arrays))
    kind = out.get("type")
    if "anyOf" in out:
        return out
    if isinstance(kind, list) and kind:
        repairs[Repair.SCHEMA_TYPE_LIST] = 1
        rest = {k: v for k, v in out.items() if k != "type"}
        return {**rest, "anyOf": [{"type": t} for t in kind]}
    if arrays and kind == "array":
        repairs[Repair.SCHEMA_ARRAY_TYPE] = 1
        rest = {k: v for k, v in out.items() if k != "type"}
        return {**rest, "anyOf": [{"type": "array"}]}
    return out


def single_type(schema: Any, repairs: Counter[str]) -> Any:
    """One type string on the parameter ``schema``; the very object when it has one."""
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if isinstance(kind, str):
        return schema
    if isinstance(kind, list) and kind:
        repairs[Repair.SCHEMA_TYPE_LIST] = 1
        return {**schema, "type": next((t for t in kind if t != "null"), kind[0])}
    for key in _UNIONS:
        members = schema.get(key)
        if isinstance(members, list) and members and all(isinstance(m, dict) for m in members):
            repairs[Repair.SCHEMA_UNION] = 1
            chosen = next((m for m in members if m.get("type") != "null"), members[0])
            merged = {k: v for k, v in schema.items() if k != key}
            for name, value in chosen.items():
                merged.setdefault(name, value)
            return single_type(merged, repairs)
    repairs[Repair.SCHEMA_TYPE_MISSING] = 1
    return {**schema, "type": _told_type(schema)}


def _told_type(schema: dict[str, Any]) -> str:
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return _JSON_TYPES.get(type(enum[0]), "string")
    if "properties" in schema:
        return "object"
    if "items" in schema:
        return "array"
    return "string"
