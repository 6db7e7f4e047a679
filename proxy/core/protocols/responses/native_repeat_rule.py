"""The same call twice in a row in a server's own Responses stream (issue 16, gap 4;
llama.cpp#21882), asked by the call driver's side (native_driver.py).

The rule of native_repeats.py, over the shared call records: a call named like the call right
before it that was not dropped is a suspect under ``dedupe_calls`` (held by the table until
its arguments end); arguments equal as JSON, ids aside, make it a repeat, always counted,
dropped only under ``dedupe_calls``. Empty arguments are the empty object, as the clients
rebuild them. Each question looks at the call and the one before it only.
"""

from __future__ import annotations

from collections.abc import Sequence

from proxy.core.calls.jsontext import INVALID
from proxy.core.calls.record import CallRecord
from proxy.core.calls.repeats import Repeats, json_equal
from proxy.core.calls.state import DROPPED


class PreviousCall(Repeats):
    """The repeat rule of a server's own stream: under ``dedupe_calls`` a call's rival is the
    call right before it that was not dropped, if named alike (a markup call too: unlike
    chat's parsed-then-markup shape, no server of its own is known to send a structured call
    again as text)."""

    __slots__ = ()

    def rivals(self, calls: Sequence[CallRecord], call: CallRecord) -> tuple[CallRecord, ...]:
        before = previous_call(calls, call) if self._dedupe else None
        return (before,) if before is not None and before.name == call.name else ()


def previous_call(calls: Sequence[CallRecord], call: CallRecord) -> CallRecord | None:
    """The call before ``call`` that was not dropped (a call asked about is nearly always
    the last, and the one before it kept)."""
    at = len(calls) - 1
    while at >= 0 and calls[at] is not call:
        at -= 1
    at -= 1
    while at >= 0 and calls[at].state is DROPPED:
        at -= 1
    return calls[at] if at >= 0 else None


def repeats_before(calls: Sequence[CallRecord], call: CallRecord) -> bool:
    """Whether ``call``, its arguments ended, repeats the call before it: the same name and
    arguments equal as JSON (empty ones are ``{}``; unparsable ones equal nothing)."""
    before = previous_call(calls, call)
    if before is None or before.name != call.name:
        return False
    value = _value(call)
    return value is not INVALID and json_equal(value, _value(before))


def _value(call: CallRecord) -> object:
    value = call.args.complete()
    if value is INVALID and not call.text().strip():
        return {}
    return value
