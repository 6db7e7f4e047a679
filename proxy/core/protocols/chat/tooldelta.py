"""One upstream ``tool_calls`` entry, read into what it says, whatever shape it came in.

Reading is pure: it does not know which call the entry belongs to. The shape repairs that
need no context are made here (Q3 id hoisted from ``function``, Q6 nulls dropped, Q9 index
coerced, Q19 object arguments turned into text) and reported in ``repairs``; the ones that
depend on the call (a repeated name is only repeated if the call has one) are the choice's.
An entry whose shape is not understood at all reads as None, and the chunk then goes out
as it came (fail open).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

import orjson

from proxy.core.jsonvalues import JSONObject, dumps_text
from proxy.core.repairs import Repair

_KNOWN: Final = frozenset({"index", "id", "type", "function"})
_KNOWN_FUNCTION: Final = frozenset({"name", "arguments", "id", "parameters"})
BOGUS_NAMES: Final = frozenset({"", "null"})  # Q2: sent where no name was meant


@dataclass(slots=True)
class ToolDelta:
    key: int | str | None  #: the upstream index (None when missing)
    id: str | None  #: a non-empty id, wherever the entry put it
    name: str | None  #: a usable name
    args: str  #: argument text; "" when the entry carried none
    has_args: bool  #: the entry carried an arguments value (Q15)
    has_type: bool  #: the entry carried "type" (any value)
    type_ok: bool  #: ... and it was "function"
    name_given: bool  #: the entry carried a name field, usable or not
    extras: JSONObject = field(default_factory=dict)  #: unknown entry fields (thought_signature)
    fn_extras: JSONObject = field(default_factory=dict)  #: unknown fields of "function"
    repairs: list[Repair] = field(default_factory=list)


def read_tool_calls(value: object) -> tuple[list[ToolDelta], list[Repair]] | None:
    """The entries of a delta's ``tool_calls`` value; None for a shape not understood."""
    if isinstance(value, dict):
        items: list[object] = [value]
        found = [Repair.TOOL_CALLS_NOT_AN_ARRAY]
    elif isinstance(value, list):
        items, found = value, []
    else:
        return None
    entries = []
    for item in items:
        entry = read_entry(item)
        if entry is None:
            return None
        entries.append(entry)
    return entries, found


class _Unreadable(Exception):
    """An entry field whose shape is not understood."""


def read_entry(entry: object) -> ToolDelta | None:
    if not isinstance(entry, dict):
        return None
    try:
        return _read(entry)
    except _Unreadable:
        return None


def _read(entry: JSONObject) -> ToolDelta:
    repairs: list[Repair] = []
    function = entry.get("function")
    if function is None:
        function = {}
    elif not isinstance(function, dict):
        raise _Unreadable
    if _has_nulls(entry) or _has_nulls(function):
        repairs.append(Repair.EXPLICIT_NULL_FIELDS)
    key = _read_index(entry.get("index"), repairs)
    ident = _read_id(entry.get("id"), repairs)
    if ident is None:
        ident = _read_id(function.get("id"), repairs)
        if ident is not None:
            repairs.append(Repair.ID_INSIDE_FUNCTION)
    name = function.get("name")
    if name is not None and not isinstance(name, str):
        raise _Unreadable
    args_value = function.get("arguments")
    if args_value is None and function.get("parameters") is not None:
        args_value = function["parameters"]  # TGI 1.4 (N2)
        repairs.append(Repair.PARAMETERS_NOT_ARGUMENTS)
    if args_value is None:
        args = ""
    elif isinstance(args_value, str):
        args = args_value
    else:
        try:
            args = dumps_text(args_value)
        except orjson.JSONEncodeError:  # nested deeper than orjson writes
            raise _Unreadable from None
        repairs.append(Repair.ARGUMENTS_NOT_A_STRING)
    kind = entry.get("type")
    return ToolDelta(
        key=key,
        id=ident,
        name=name if name not in BOGUS_NAMES else None,
        args=args,
        has_args=args_value is not None,
        has_type=kind is not None,
        type_ok=kind == "function",
        name_given=name is not None,
        extras=_extras(entry, _KNOWN),
        fn_extras=_extras(function, _KNOWN_FUNCTION),
        repairs=repairs,
    )


def _read_index(value: object, repairs: list[Repair]) -> int | str | None:
    if value is None:
        repairs.append(Repair.INDEX_MISSING)
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        repairs.append(Repair.INDEX_NOT_INT)
        return int(value) if value.isascii() and value.isdigit() else value
    raise _Unreadable


def _read_id(value: object, repairs: list[Repair]) -> str | None:
    """A non-empty id, or None."""
    if value is None or value == "":
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        repairs.append(Repair.ID_NOT_A_STRING)
        return str(value)
    raise _Unreadable


def _has_nulls(obj: JSONObject) -> bool:
    return any(v is None for v in obj.values())


def _extras(obj: JSONObject, known: frozenset[str]) -> JSONObject:
    return {k: v for k, v in obj.items() if k not in known and v is not None}


def read_choices(
    choices: list[object],
) -> list[tuple[list[ToolDelta], list[Repair]] | None] | None:
    """Each choice's tool-call entries, read before any state changes; None if any shape is
    not understood, so that the chunk then goes out raw and leaves no trace."""
    reads: list[tuple[list[ToolDelta], list[Repair]] | None] = []
    for choice in choices:
        if not isinstance(choice, dict):
            return None
        delta = choice.get("delta")
        if not isinstance(delta, dict) or "tool_calls" not in delta:
            reads.append(None)
            continue
        value = delta["tool_calls"]
        if value is None or value == []:
            reads.append(([], [Repair.TOOL_CALLS_EMPTY]))  # Q21
            continue
        read = read_tool_calls(value)
        if read is None:
            return None
        reads.append(read)
    return reads
