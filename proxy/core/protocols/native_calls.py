"""What the calls of both native repairers share: their tally, and the repeat rule.

:class:`NativeTally` is what the calls of one native stream count and hold (calls/driver.py's
``Tally``; chat's is its ``StreamContext``).

The same call twice in a row in a server's own stream (issue 16, gap 4; llama.cpp#21882): the
native repairers (responses/native/calls.py, messages/native/calls.py) drive their calls
through the shared table (calls/state.py), and ask this one rule of them, over the shared call
records (calls/record.py):

* a call named like the call right before it that was not dropped is a suspect under
  ``dedupe_calls`` (its rivals, :meth:`PreviousCall.rivals`): the table holds it until its
  arguments end;
* arguments equal as JSON, ids aside, make it a repeat (:func:`repeats_before`): always
  counted (``call-duplicated``), dropped only under ``dedupe_calls``, and a dropped call is no
  call before the next one. Two equal calls can be meant, so the default keeps them;
* empty arguments are the empty object, as the clients rebuild them.

Chat's rule (calls/repeats.py) differs on purpose: there the k-th markup call equal to the
k-th structured call of the choice is always dropped while every markup call before it was a
copy (issue 24 item 5: servers that stream a parsed call and leave its text in content); no
server's own Responses or Messages stream is known to do that, so here
a markup call is compared with the call right before it like any other. Each question looks
at the call and the one before it only, and each call's arguments are parsed once
(``ArgText.complete`` keeps the parse).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proxy.core.arguments.rules import CallRules
from proxy.core.calls.record import CallRecord
from proxy.core.calls.repeats import Repeats, json_equal
from proxy.core.calls.state import DROPPED
from proxy.core.calls.wrapper import entries, is_wrapper
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID, JSONObject
from proxy.core.repairs import DETECTED_ONLY, Repair


@dataclass(slots=True)
class NativeTally:
    """What the calls of one native stream share (calls/driver.py's ``Tally``)."""

    ids: IdPool
    repairs: Counter[str]
    fallback_name: str | None = None  #: the name a nameless call gets (Responses only)
    dropped: list[str] = field(default_factory=list)  #: a dropped repeat's arguments
    held: int = 0
    kept: int = 0


class PreviousCall(Repeats):
    """The driver's repeat question for a server's own stream: under ``dedupe_calls`` a call's
    rival is the call right before it that was not dropped, if named alike."""

    __slots__ = ()

    def rivals(self, calls: Sequence[CallRecord], call: CallRecord) -> tuple[CallRecord, ...]:
        if not self._dedupe or call.name is None:
            return ()
        before = previous_call(calls, call)
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
    if before is None or call.name is None or before.name != call.name:
        return False
    value = _value(call)
    return value is not INVALID and json_equal(value, _value(before))


def _value(call: CallRecord) -> object:
    value = call.args.complete()
    if value is INVALID and not call.text().strip():
        return {}
    return value


def whole_calls(
    items: list[Any],
    kind: str,
    *,
    rules: CallRules | None,
    one_call: bool,
    repairs: Counter[str],
    cut: Callable[[JSONObject], bool],
    read: Callable[[JSONObject], str | None],
    write: Callable[[JSONObject, str], None],
    unwrap: Callable[[JSONObject, str, str], JSONObject] | None = None,
) -> list[Any]:
    """A whole answer's calls (its items of type ``kind``), as issue 25 asks of a stream's:
    the model's multi-call wrapper first split into its calls (``unwrap`` makes the item of
    one entry from the wrapper's, a name and the arguments; issue 24 item 6), then past the
    first dropped under ``one_call`` (``parallel-call-dropped``); each kept call's
    arguments (``read``) fixed where the rules may (never a ``cut`` call; ``write`` puts the
    fixed text), then checked. The items that go out."""
    if unwrap is not None:
        items = unwrapped(
            items, kind, rules=rules, repairs=repairs, cut=cut, read=read, make=unwrap
        )
    out: list[Any] = []
    calls = 0
    for item in items:
        if not isinstance(item, dict) or item.get("type") != kind:
            out.append(item)
            continue
        calls += 1
        if one_call and calls > 1:
            repairs[Repair.PARALLEL_CALL_DROPPED] += 1
            continue
        out.append(item)
        text = read(item)
        if rules is None or text is None:
            continue
        name = item.get("name")
        fixed = rules.answer(name if isinstance(name, str) else None, text, repairs, cut=cut(item))
        if fixed is not text:
            write(item, fixed)
    return out


def unwrapped(
    items: list[Any],
    kind: str,
    *,
    rules: CallRules | None,
    repairs: Counter[str],
    cut: Callable[[JSONObject], bool],
    read: Callable[[JSONObject], str | None],
    make: Callable[[JSONObject, str, str], JSONObject],
    name_of: Callable[[JSONObject], object] = lambda item: item.get("name"),
) -> list[Any]:
    """A whole answer's items with each wrapper call (calls/wrapper.py) that the request
    offers no tool for replaced by one item per entry (``make``), counted as
    ``parallel-wrapper``; a ``cut`` one, or one not of the wrapper's shape, stays. (Chat's
    calls carry their name in ``function``: ``name_of``.)"""
    out: list[Any] = []
    for item in items:
        found = None
        if isinstance(item, dict) and item.get("type") == kind and not cut(item):
            name = name_of(item)
            text = read(item)
            if (
                isinstance(name, str)
                and text is not None
                and is_wrapper(name, lambda n: _offered(rules, n))
            ):
                found = entries(text)
        if found is None:
            out.append(item)
            continue
        repairs[Repair.PARALLEL_WRAPPER] += 1
        out += [make(item, name, arguments) for name, arguments in found]
    return out


def _offered(rules: CallRules | None, name: str) -> bool:
    return rules is not None and rules.tools.parameters(name) is not None


def changes(repairs: Counter[str]) -> bool:
    """Whether a whole answer's repairs changed it (a detected kind changes nothing)."""
    return any(kind not in DETECTED_ONLY for kind in repairs)
