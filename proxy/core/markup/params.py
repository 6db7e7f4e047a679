"""Typing the text values of the XML-like dialects (Qwen3-Coder, GLM) from the request's tools.

Those templates write every parameter value as text: strings as they are, objects and arrays
as JSON, other values as the template engine prints them (``3``, ``true``, Python's ``True``
or ``None`` from ``| string``). The arguments the client gets must be a JSON object with the
types of the tool's JSON schema, so each value is converted by the type its schema declares:

* ``string`` (or no declared type: the parameter is unknown, or its schema says nothing) ->
  the text, unchanged;
* ``integer`` / ``number`` / ``boolean`` / ``null`` / ``object`` / ``array`` -> parsed, the
  first declared type that fits (``type`` lists and ``anyOf``/``oneOf`` branches count);
* a value that fits none of the declared types stays a string: the model's text is never
  dropped or invented.

:class:`ArgsWriter` builds the arguments JSON text one parameter at a time, so a parameter can
be forwarded the moment it is complete (and a string one while it is being written).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from proxy.core.markup.base import Tools

Schema = Mapping[str, Any]
_FALSE: Final = ("false", "False")
_TRUE: Final = ("true", "True")
_NULL: Final = ("null", "None")


def parameter_schemas(tools: Tools) -> dict[str, dict[str, Schema]]:
    """function name -> parameter name -> that parameter's JSON schema."""
    found: dict[str, dict[str, Schema]] = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            continue
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        found[function["name"]] = {
            key: value
            for key, value in (properties or {}).items()
            if isinstance(key, str) and isinstance(value, Mapping)
        }
    return found


def declared_types(schema: Schema | None) -> list[str]:
    """The JSON types a schema allows, in the order it names them; [] when it names none."""
    if not schema:
        return []
    kind = schema.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list):
        return [k for k in kind if isinstance(k, str)]
    types: list[str] = []
    for key in ("anyOf", "oneOf"):
        for branch in schema.get(key) or ():
            if isinstance(branch, Mapping):
                types += [t for t in declared_types(branch) if t not in types]
    if not types and "properties" in schema:
        return ["object"]
    if not types and "items" in schema:
        return ["array"]
    return types


def is_text(schema: Schema | None) -> bool:
    """Whether the value is kept as text whatever it says (so it can be streamed)."""
    types = declared_types(schema)
    return not types or types == ["string"]


def typed_json(text: str, schema: Schema | None) -> str:
    """The JSON text of a parameter value written as ``text``."""
    for kind in declared_types(schema):
        value = _parse(text.strip(), kind)
        if value is not _NO:
            return orjson.dumps(value).decode()
    return string_json(text)


def json_value(text: str) -> str | None:
    """The JSON text of a value the markup says is JSON, compacted; None when it is not."""
    try:
        return orjson.dumps(orjson.loads(text.strip())).decode()
    except orjson.JSONDecodeError:
        return None


def string_json(text: str) -> str:
    return orjson.dumps(text).decode()


_NO: Final = object()


def _parse(text: str, kind: str) -> Any:
    if kind == "boolean":
        return True if text in _TRUE else False if text in _FALSE else _NO
    if kind == "null":
        return None if text in _NULL else _NO
    if kind not in ("integer", "number", "object", "array"):
        return _NO
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return _NO
    if kind == "integer":
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value if isinstance(value, int) and not isinstance(value, bool) else _NO
    if kind == "number":
        return value if isinstance(value, int | float) and not isinstance(value, bool) else _NO
    wanted = dict if kind == "object" else list
    return value if isinstance(value, wanted) else _NO


class ArgsWriter:
    """The arguments object as text, written a parameter at a time."""

    def __init__(self) -> None:
        self._count = 0

    @staticmethod
    def start() -> str:
        return "{"

    def key(self, name: str) -> str:
        """``"name": `` with the separator the parameter needs."""
        sep = ", " if self._count else ""
        self._count += 1
        return f"{sep}{string_json(name)}: "

    @staticmethod
    def end() -> str:
        return "}"
