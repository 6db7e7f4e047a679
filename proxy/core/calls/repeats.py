"""Calls that repeat an earlier call of the same choice: same name, JSON-equal arguments.

Two shapes of upstream send them (issue 16). Some servers stream a parsed call as
``tool_calls`` and leave its text in ``content`` too, so the markup calls after the
structured ones are copies of them, in order; llama.cpp with some templates parses the
model's first call and leaves the next ones as markup, which are new calls (llama.cpp
b5494: structured ``get_weather(Paris)``, then markup ``get_time(UTC)`` and
``get_weather(Paris)``, three calls the model made). So, call by call (issue 24 item 5): the
k-th markup call is a copy, always dropped, when it equals the k-th structured call and every
markup call before it was a copy; from the first markup call that is not a copy on, they are
new calls (indexed after the structured ones), whose repeats are any call's. Gemma 4 on
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

    __slots__ = ("_copying", "_dedupe", "_last_markup", "_markup", "_structured")

    def __init__(self, *, dedupe: bool) -> None:
        self._dedupe = dedupe
        self._structured: list[CallRecord] = []  # the structured calls, as they were named
        self._markup = 0  # the markup calls named so far
        self._last_markup: CallRecord | None = None
        self._copying = True  # every markup call so far was a copy

    def rivals(self, calls: Sequence[CallRecord], call: CallRecord) -> tuple[CallRecord, ...]:
        """The earlier calls that ``call``, just named, is dropped for repeating: from markup,
        the structured call it may be a copy of (the k-th markup call's is the k-th
        structured call, while every markup call before it was a copy); under dedupe_calls,
        the call right before it of the same name."""
        assert call.name is not None
        found: list[CallRecord] = []
        if call.from_markup:
            copy = self._copy_of(call)
            if copy is not None:
                found.append(copy)
        else:
            self._structured.append(call)
        before = _before(calls, call)
        if self._dedupe and before is not None and before.name == call.name:
            found.append(before)
        return tuple(dict.fromkeys(found))

    def _copy_of(self, call: CallRecord) -> CallRecord | None:
        """The structured call that markup ``call`` is a copy of if its arguments equal it.
        A markup call is given out whole (issue 24 item 4), so the one before it was settled
        (dropped as a copy, or not) by the time this one is named."""
        last, self._last_markup = self._last_markup, call
        if last is not None and last.state is not CallState.DROPPED:
            self._copying = False
        k, self._markup = self._markup, self._markup + 1
        if not self._copying or k >= len(self._structured):
            self._copying = False
            return None
        if self._structured[k].name != call.name:
            self._copying = False
            return None
        return self._structured[k]

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
