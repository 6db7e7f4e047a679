"""The life of one tool call in the output: its states, its inputs, and every transition.

Rule 1: every state change of a call lives in this module: the tables below, and the changes
a state triggers in a call's flags or in other calls (the end of this module). A protocol's
decoder (chat/call_matching.py, chat/markup_bridge.py) classifies what arrived into a
:class:`CallInput`; the driver (calls/driver.py) looks the pair up here and performs the
named :class:`Action`. Rule 2: a call's state says what the client
has seen of it, never what the upstream did; the upstream's shape is dealt with before it
becomes an input. Rule 3: the hot paths ask the same table: a fragment goes out as it came
only for a call whose state the table says streams its arguments (``streams_args``), an
answer the driver keeps on the call at each transition so that no delta looks it up.

Theory of operation. A call starts NAMELESS: nothing can be sent before its name is known
(Q14), so what arrives is held. The entry that brings the name decides how the call opens,
by the argument text known at that moment:

* none: the opening delta goes out with ``arguments: ""``;
* the beginning of the arguments: an opening delta with ``""``, then a delta of its own with
  the text (Q13);
* complete arguments: one delta with the whole call, kept whole (Q16 is legal);
* exactly ``{}``: maybe a whole call without arguments, maybe a placeholder in front of the
  real arguments (case m of the client matrix, tests/clients/cases/m_empty_object_first.toml).
  In S1 the opening is held (PLACEHOLDER) until the call's next input tells which.

In S2 (coalesced form) a named call is COLLECTING until its arguments form a complete JSON
value (COMPLETE) or the choice ends (END); then it goes out whole. OPEN means the opening
is out; later text becomes continuation deltas. END comes when the choice finishes, the
stream ends, or (for a held placeholder) another call of the same choice moves on.

A call that may repeat one already in the choice (the call before it under ``dedupe_calls``,
or a structured call when it comes from markup) is a SUSPECT once named: held in both forms
until its arguments end (COMPLETE or END), then compared once. DUPLICATE drops it for good
(DROPPED; nothing of it reaches the client, its text is reported as dropped); otherwise it
opens as a late name does (S1: the opening with ``""``, then the arguments; S2: whole).

Under ``parallel_tool_calls: false`` (issue 25 item 2) a call named after the first one the
choice (or native stream) named is EXTRA as it would leave NAMELESS: DROPPED before anything
of it went out, as a repeat is.

The model's multi-call wrapper (calls/wrapper.py; issue 24 item 6), when the request offers
no tool of its name, is a SUSPECT once named, so held until its arguments end; ended whole
and of the wrapper's shape, it is UNWRAPped: DROPPED, and one call per entry named in its place
(the driver makes them, through the protocol, and names each as a call whole at once). A
wrapper cut short, or not of the shape, opens as any suspect does: as it came.

Each table is total over its form's states and every input (tests/core/calls/test_state_table.py
checks that), so a missing entry can only be a bug in this file; :func:`transition` then
raises :class:`NormalizerError` naming the pair.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import Enum, auto
from typing import Final, Protocol, TypeVar

from proxy.core.errors import NormalizerError


class CallState(Enum):
    NAMELESS = auto()  #: no usable name yet; everything is held
    PLACEHOLDER = auto()  #: S1: the opening with arguments "{}" is held
    COLLECTING = auto()  #: S2: named, held until whole
    OPEN = auto()  #: the opening delta has been sent
    SUSPECT = auto()  #: named, held until its arguments end: it may repeat an earlier call
    DROPPED = auto()  #: a repeat of an earlier call, dropped; so is whatever follows it


class CallInput(Enum):
    ARGS = auto()  #: an entry without a (new) name; its argument text may be empty
    NAMED_EMPTY = auto()  #: the entry that brings the name; no argument text so far
    NAMED_PARTIAL = auto()  #: ... with the beginning of the arguments
    NAMED_WHOLE = auto()  #: ... with complete arguments
    NAMED_PLACEHOLDER = auto()  #: ... with arguments that are exactly an empty object
    NAMED_SUSPECT = auto()  #: the name of a call that may repeat an earlier one
    COMPLETE = auto()  #: S2: the collected arguments now form a complete JSON value
    END = auto()  #: the choice finished, the stream ended, or another call moved on
    DUPLICATE = auto()  #: a suspect's arguments ended equal to those of the call it may repeat
    #: a call past the one the request allowed (``parallel_tool_calls: false``), as it would
    #: leave NAMELESS: dropped before anything of it goes out (issue 25 item 2)
    EXTRA = auto()
    #: a suspect that is the model's multi-call wrapper (calls/wrapper.py), its arguments
    #: ended whole and of the wrapper's shape: one call per entry instead (issue 24 item 6)
    UNWRAP = auto()


class Action(Enum):
    NOTHING = auto()
    HOLD = auto()  #: keep the entry's text until the name is known
    OPEN = auto()  #: send the opening delta with arguments ""
    OPEN_SPLIT = auto()  #: send the opening delta with "", then the text known so far
    OPEN_WHOLE = auto()  #: send the whole call in one delta
    HOLD_OPENING = auto()  #: build the opening with "{}" but keep it back
    RELEASE_FOR_ARGS = auto()  #: send the held opening (without a placeholder), then the text
    RELEASE = auto()  #: send the held opening as it is
    SEND_ARGS = auto()  #: send the text as a continuation delta
    CLOSE_ARGS = auto()  #: send "{}" if the call never got argument text
    FALLBACK = auto()  #: the name never came: send what is held (S1)
    COLLECT = auto()  #: S2: keep the text
    SEND_WHOLE = auto()  #: S2: send the whole call in one delta
    FALLBACK_WHOLE = auto()  #: S2: the name never came: send the whole call as held
    DROP = auto()  #: drop what the call holds and the entry's text (reported as dropped)
    UNWRAP = auto()  #: the wrapper goes (its text reported as dropped); its entries open


Table = dict[tuple[CallState, CallInput], tuple[CallState, Action]]

_NAMED: Final = (
    CallInput.NAMED_EMPTY,
    CallInput.NAMED_PARTIAL,
    CallInput.NAMED_WHOLE,
    CallInput.NAMED_PLACEHOLDER,
)
_TEXT: Final = (CallInput.ARGS, *_NAMED, CallInput.NAMED_SUSPECT)  # a name is no news: text

NAMELESS, PLACEHOLDER, COLLECTING, OPEN, SUSPECT, DROPPED = CallState

# Only a SUSPECT can be a DUPLICATE (calls/driver.py compares nothing else); the other states
# ignore the input, which keeps the tables total.
_NOT_SUSPECT: Final = {
    (state, CallInput.DUPLICATE): (state, Action.NOTHING)
    for state in (NAMELESS, PLACEHOLDER, COLLECTING, OPEN)
}

# Only a NAMELESS call is asked whether it is one too many (calls/driver.py, as it would
# leave NAMELESS, before anything of it went out): it is dropped; the other states ignore it.
_EXTRA: Final = {
    (NAMELESS, CallInput.EXTRA): (DROPPED, Action.DROP),
    **{
        (state, CallInput.EXTRA): (state, Action.NOTHING)
        for state in (PLACEHOLDER, COLLECTING, OPEN)
    },
    (SUSPECT, CallInput.EXTRA): (DROPPED, Action.DROP),
}

# Only a SUSPECT is unwrapped (calls/driver.py asks nothing else): the wrapper, held until its
# arguments ended, gives way to one call per entry; the other states ignore the input.
_UNWRAP: Final = {
    (SUSPECT, CallInput.UNWRAP): (DROPPED, Action.UNWRAP),
    **{
        (state, CallInput.UNWRAP): (state, Action.NOTHING)
        for state in (NAMELESS, PLACEHOLDER, COLLECTING, OPEN)
    },
}

# Shared by both forms: a suspect collects until its arguments end; a dropped call drops.
_SUSPECTS: Final[Table] = {
    (NAMELESS, CallInput.NAMED_SUSPECT): (SUSPECT, Action.COLLECT),
    **{(SUSPECT, i): (SUSPECT, Action.COLLECT) for i in _TEXT},
    (SUSPECT, CallInput.DUPLICATE): (DROPPED, Action.DROP),
    **{(DROPPED, i): (DROPPED, Action.DROP) for i in CallInput},
}

# S1, the streamed form (docs/quirks.md, the canonical chat stream's rules 6-11).
S1: Final[Table] = {
    (NAMELESS, CallInput.ARGS): (NAMELESS, Action.HOLD),
    (NAMELESS, CallInput.NAMED_EMPTY): (OPEN, Action.OPEN),
    (NAMELESS, CallInput.NAMED_PARTIAL): (OPEN, Action.OPEN_SPLIT),
    (NAMELESS, CallInput.NAMED_WHOLE): (OPEN, Action.OPEN_WHOLE),
    (NAMELESS, CallInput.NAMED_PLACEHOLDER): (PLACEHOLDER, Action.HOLD_OPENING),
    (NAMELESS, CallInput.COMPLETE): (NAMELESS, Action.NOTHING),
    (NAMELESS, CallInput.END): (OPEN, Action.FALLBACK),
    **{(PLACEHOLDER, i): (OPEN, Action.RELEASE_FOR_ARGS) for i in _TEXT},
    (PLACEHOLDER, CallInput.COMPLETE): (PLACEHOLDER, Action.NOTHING),
    (PLACEHOLDER, CallInput.END): (OPEN, Action.RELEASE),
    **{(OPEN, i): (OPEN, Action.SEND_ARGS) for i in _TEXT},
    (OPEN, CallInput.COMPLETE): (OPEN, Action.NOTHING),
    (OPEN, CallInput.END): (OPEN, Action.CLOSE_ARGS),
    **{k: v for k, v in _NOT_SUSPECT.items() if k[0] is not COLLECTING},
    **{k: v for k, v in _EXTRA.items() if k[0] is not COLLECTING},
    **{k: v for k, v in _UNWRAP.items() if k[0] is not COLLECTING},
    **_SUSPECTS,
    (SUSPECT, CallInput.COMPLETE): (OPEN, Action.OPEN_SPLIT),
    (SUSPECT, CallInput.END): (OPEN, Action.OPEN_SPLIT),
}

# S2, the coalesced form: each call whole in one delta.
S2: Final[Table] = {
    (NAMELESS, CallInput.ARGS): (NAMELESS, Action.HOLD),
    **{(NAMELESS, i): (COLLECTING, Action.COLLECT) for i in _NAMED},
    (NAMELESS, CallInput.COMPLETE): (NAMELESS, Action.NOTHING),
    (NAMELESS, CallInput.END): (OPEN, Action.FALLBACK_WHOLE),
    **{(COLLECTING, i): (COLLECTING, Action.COLLECT) for i in _TEXT},
    (COLLECTING, CallInput.COMPLETE): (OPEN, Action.SEND_WHOLE),
    (COLLECTING, CallInput.END): (OPEN, Action.SEND_WHOLE),
    **{(OPEN, i): (OPEN, Action.SEND_ARGS) for i in _TEXT},
    (OPEN, CallInput.COMPLETE): (OPEN, Action.NOTHING),
    (OPEN, CallInput.END): (OPEN, Action.CLOSE_ARGS),
    **{k: v for k, v in _NOT_SUSPECT.items() if k[0] is not PLACEHOLDER},
    **{k: v for k, v in _EXTRA.items() if k[0] is not PLACEHOLDER},
    **{k: v for k, v in _UNWRAP.items() if k[0] is not PLACEHOLDER},
    **_SUSPECTS,
    (SUSPECT, CallInput.COMPLETE): (OPEN, Action.SEND_WHOLE),
    (SUSPECT, CallInput.END): (OPEN, Action.SEND_WHOLE),
}

S1_STATES: Final = (NAMELESS, PLACEHOLDER, OPEN, SUSPECT, DROPPED)
S2_STATES: Final = (NAMELESS, COLLECTING, OPEN, SUSPECT, DROPPED)


def transition(table: Table, state: CallState, event: CallInput) -> tuple[CallState, Action]:
    try:
        return table[state, event]
    except KeyError:
        raise NormalizerError(
            f"no transition for a tool call in state {state.name} on {event.name}"
        ) from None


# -- what the states trigger ---------------------------------------------------------------
# The tables say what one input does to one call. These say when the driver must make an
# input itself, and what a transition changes beyond the state; they too are the only place.

#: FALLBACK: a call whose name never came opens as the entry that named it would have, by the
#: argument text held; a placeholder is no longer held back (the choice is over): it goes out
#: as the call's whole arguments.
FALLBACK_OPENING: Final = {
    CallInput.NAMED_EMPTY: Action.OPEN,
    CallInput.NAMED_PARTIAL: Action.OPEN_SPLIT,
    CallInput.NAMED_WHOLE: Action.OPEN_WHOLE,
    CallInput.NAMED_PLACEHOLDER: Action.OPEN_WHOLE,
}


def streams_args(table: Table, state: CallState) -> bool:
    """Whether an argument fragment of a call in ``state`` goes out as it came: the table
    keeps the state on ARGS and sends the text (SEND_ARGS). The hot path takes a fragment
    only for such a call."""
    return transition(table, state, CallInput.ARGS) == (state, Action.SEND_ARGS)


def _streaming(table: Table, states: Iterable[CallState]) -> tuple[CallState, ...]:
    # a tuple: ``in`` compares by identity first, where a dict would hash an Enum in Python
    return tuple(state for state in states if streams_args(table, state))


S1_STREAMS: Final = _streaming(S1, S1_STATES)
S2_STREAMS: Final = _streaming(S2, S2_STATES)


def replaces_placeholder(text: str) -> bool:
    """Whether text after a ``{}`` placeholder is the real object, which the placeholder then
    was only the stand-in for (dropped, ``args-placeholder``); else it follows the ``{}``."""
    return text.lstrip().startswith("{")


SETTLED: Final = (OPEN, DROPPED)  #: nothing more of the call is held
#: what comes after such a call waits behind it; no call is held again once it is not
HELD: Final = (NAMELESS, PLACEHOLDER, COLLECTING, SUSPECT)
COLLECTED: Final = (COLLECTING, SUSPECT)  #: held until the arguments are whole
ARGS_END: Final = (CallInput.COMPLETE, CallInput.END)  #: a suspect is compared on these


def placeholder_after(names_placeholder: bool, placeholder: bool, text: str) -> tuple[bool, bool]:
    """COLLECT: whether the collected text is still only a ``{}`` placeholder after an entry
    brought ``text`` (``names_placeholder``: the entry named the call with exactly ``{}``),
    and whether the placeholder is to be dropped."""
    if names_placeholder:
        return True, False
    if placeholder and text:
        return False, replaces_placeholder(text)
    return placeholder, False


def may_become_whole(state: CallState, placeholder: bool) -> bool:
    """S2: whether a call whose kept text now ends a complete JSON value is whole (the driver
    then sends the calls that are due, ``whole_calls_due``, or compares a suspect at once,
    ``compared_when_whole``). A placeholder is not: the real arguments may follow it."""
    return state in COLLECTED and not placeholder


def compared_when_whole(table: Table, state: CallState) -> bool:
    """Whether a call that just became whole gets COMPLETE at once: an S1 suspect (compared,
    then opened or dropped); in S2 every whole call waits its turn (``whole_calls_due``)."""
    return state is SUSPECT and table is S1


def closes_whole(table: Table, state: CallState) -> bool:
    """Whether the end of a call's arguments in the markup (its block closed) makes it whole,
    as in S2 a collected call is; a call in any other state gets END."""
    return table is S2 and state in COLLECTED


class _Collected(Protocol):
    state: CallState
    whole: bool


C = TypeVar("C", bound=_Collected)
T = TypeVar("T")


def whole_calls_due(calls: Sequence[C], unsent: int) -> tuple[list[C], int]:
    """S2: the calls that now go out whole (each gets COMPLETE, in order), and the first call
    still unsent. Calls go out whole as soon as they are, but never before an earlier call;
    ``unsent`` is the first call not yet settled, so that no delta scans the calls before it."""
    due: list[C] = []
    while unsent < len(calls):
        call = calls[unsent]
        if call.state not in SETTLED:
            if call.state not in COLLECTED or not call.whole:
                break
            due.append(call)
        unsent += 1
    return due, unsent


def released_by(call: T, held: Iterable[T]) -> list[T]:
    """The held calls that get END once ``call`` moves on: every other of the choice's held
    placeholders (S1: sent as they are) or suspects (their arguments have ended)."""
    return [other for other in held if other is not call]
