"""The same call twice in a row in a server's own stream (issue 16, gap 4; llama.cpp#21882).

The native repairers (Messages, Responses) follow the calls of one message or response in the
order they go out. A call whose name is the name of the call right before it is a *suspect*
under ``dedupe_calls``: the repairer holds its events until its arguments end, then asks
:meth:`CallRepeats.ended` once. Equal arguments (as JSON; ids aside) are a repeat, always
counted (``call-duplicated``); under ``dedupe_calls`` the repeat is dropped, and the call
before stays the one it repeated. Two equal calls can be meant, so the default keeps them.

Each call's arguments are parsed once, when they end; nothing here runs per event.
"""

from __future__ import annotations

import orjson

from proxy.core.calls.repeats import json_equal

_INVALID = object()  # arguments that are no JSON: never equal to anything


class CallRepeats:
    __slots__ = ("_name", "_value", "dedupe")

    def __init__(self, *, dedupe: bool) -> None:
        self.dedupe = dedupe
        self._name: str | None = None
        self._value: object = _INVALID

    def suspect(self, name: object) -> bool:
        """Whether a call just named must be held until its arguments end."""
        return self.dedupe and isinstance(name, str) and name == self._name

    def ended(self, name: object, arguments: str) -> bool:
        """A call's arguments ended: whether it repeats the call right before it."""
        value = _parse(arguments)
        repeat = (
            isinstance(name, str)
            and name == self._name
            and value is not _INVALID
            and json_equal(value, self._value)
        )
        if not (repeat and self.dedupe):  # a dropped repeat is no call before the next
            self._name = name if isinstance(name, str) else None
            self._value = value
        return repeat


def _parse(arguments: str) -> object:
    """Empty arguments are the empty object, as the clients rebuild them."""
    if not arguments.strip():
        return {}
    try:
        return orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return _INVALID
