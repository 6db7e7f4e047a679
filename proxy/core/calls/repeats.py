"""Calls that repeat an earlier call of the same choice: same name, JSON-equal arguments.

Two shapes of upstream send them (issue 16). llama.cpp with some templates parses the model's
first call into ``tool_calls`` and leaves the next ones as markup in ``content``; a markup call
equal to a structured call is the same call a second time, and is always dropped. Gemma 4 on
llama.cpp (llama.cpp#21882) sends the same call twice in a row; two equal calls can be meant,
so the second is dropped only under ``dedupe_calls`` and counted either way.

A call that may be a repeat is known by its name when it is named: its *rivals* are the calls
it would repeat. The driver then holds it (SUSPECT) until its arguments end, and asks
``repeats`` once. The parses come from ``ArgText.complete``, which keeps them, so no question
here reads a call's text more than once.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson

from proxy.core.calls.record import CallRecord
from proxy.core.calls.state import CallState
from proxy.core.jsonvalues import INVALID


class Repeats:
    """What one choice knows of its calls for finding repeats."""

    __slots__ = ("_dedupe", "_structured")

    def __init__(self, *, dedupe: bool) -> None:
        self._dedupe = dedupe
        self._structured: dict[str, list[CallRecord]] = {}  # the structured calls named, by name

    def rivals(self, calls: Sequence[CallRecord], call: CallRecord) -> tuple[CallRecord, ...]:
        """The earlier calls that ``call``, just named, is dropped for repeating: from markup,
        the structured calls of its name; under dedupe_calls, the call right before it of the
        same name."""
        assert call.name is not None
        found: list[CallRecord] = []
        if call.from_markup:
            found += self._structured.get(call.name, ())
        else:
            self._structured.setdefault(call.name, []).append(call)
        before = _before(calls, call)
        if self._dedupe and before is not None and before.name == call.name:
            found.append(before)
        return tuple(dict.fromkeys(found))

    @staticmethod
    def count(calls: Sequence[CallRecord]) -> int:
        """The calls equal to the call before them, their arguments ended (those dropped
        were counted when they were, and are no call before another)."""
        found = 0
        before: object = INVALID
        name: str | None = None
        for call in calls:
            if call.state is CallState.DROPPED:
                continue
            value = call.args.complete() if call.args else INVALID
            if value is not INVALID and call.name == name and json_equal(before, value):
                found += 1
            before, name = value, call.name
        return found


def repeats(call: CallRecord) -> bool:
    """Whether a suspect, its arguments ended, equals one of its rivals."""
    value = call.args.complete()
    return value is not INVALID and any(
        rival.state is not CallState.DROPPED and json_equal(rival.args.complete(), value)
        for rival in call.rivals
    )


def json_equal(a: object, b: object) -> bool:
    """Equal as JSON: Python's ``==`` alone takes ``1`` for ``true`` and for ``1.0``."""
    sort = orjson.OPT_SORT_KEYS
    return a == b and orjson.dumps(a, option=sort) == orjson.dumps(b, option=sort)


def _before(calls: Sequence[CallRecord], call: CallRecord) -> CallRecord | None:
    """The call right before ``call`` (a call just named is nearly always the last)."""
    at = len(calls) - 1
    while at >= 0 and calls[at] is not call:
        at -= 1
    return calls[at - 1] if at > 0 else None
