"""The life of one tool call in the output: its states, its inputs, and every transition.

Rule 1: every state change of a call lives in this module: the tables below, and the changes
a state triggers in a call's flags or in other calls (the end of this module). The driver
(chat/call_driver.py) only classifies what arrived into a :class:`CallInput`, looks the pair
up here and performs the named :class:`Action`. Rule 2: a call's state says what the client
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
  real arguments (clients.md case m). In S1 the opening is held (PLACEHOLDER) until the
  call's next input tells which.

In S2 (coalesced form) a named call is COLLECTING until its arguments form a complete JSON
value (COMPLETE) or the choice ends (END); then it goes out whole. OPEN means the opening
is out; later text becomes continuation deltas. END comes when the choice finishes, the
stream ends, or (for a held placeholder) another call of the same choice moves on.

Each table is total over its form's states and every input (tests/test_toolcall_state.py
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


class CallInput(Enum):
    ARGS = auto()  #: an entry without a (new) name; its argument text may be empty
    NAMED_EMPTY = auto()  #: the entry that brings the name; no argument text so far
    NAMED_PARTIAL = auto()  #: ... with the beginning of the arguments
    NAMED_WHOLE = auto()  #: ... with complete arguments
    NAMED_PLACEHOLDER = auto()  #: ... with arguments that are exactly an empty object
    COMPLETE = auto()  #: S2: the collected arguments now form a complete JSON value
    END = auto()  #: the choice finished, the stream ended, or another call moved on


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


Table = dict[tuple[CallState, CallInput], tuple[CallState, Action]]

_NAMED: Final = (
    CallInput.NAMED_EMPTY,
    CallInput.NAMED_PARTIAL,
    CallInput.NAMED_WHOLE,
    CallInput.NAMED_PLACEHOLDER,
)
_TEXT: Final = (CallInput.ARGS, *_NAMED)  # for a named call a name is no news: only text

NAMELESS, PLACEHOLDER, COLLECTING, OPEN = CallState

# S1, the streamed form (clients.md section 2, rules 6-11).
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
}

S1_STATES: Final = (NAMELESS, PLACEHOLDER, OPEN)
S2_STATES: Final = (NAMELESS, COLLECTING, OPEN)


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
    keeps the state on ARGS and sends the text (SEND_ARGS). The hot paths take a fragment,
    or markup arguments, only for such a call."""
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


def placeholder_after(event: CallInput, placeholder: bool, text: str) -> tuple[bool, bool]:
    """S2 (COLLECT): whether the collected text is still only a ``{}`` placeholder after
    ``event`` brought ``text``, and whether the placeholder is to be dropped."""
    if event is CallInput.NAMED_PLACEHOLDER:
        return True, False
    if placeholder and text:
        return False, replaces_placeholder(text)
    return placeholder, False


def may_become_whole(state: CallState, placeholder: bool) -> bool:
    """S2: whether a call whose kept text now ends a complete JSON value is whole (the driver
    then sends the calls that are due, ``whole_calls_due``). A placeholder is not: the real
    arguments may follow it. Markup closing a call makes it whole the same way."""
    return state is COLLECTING and not placeholder


def closes_whole(state: CallState) -> bool:
    """Whether the end of a call's arguments in the markup (its block closed) makes it whole,
    as in S2 a collecting call is; a call in any other state gets END."""
    return state is COLLECTING


class _Collected(Protocol):
    state: CallState
    whole: bool


C = TypeVar("C", bound=_Collected)
T = TypeVar("T")


def whole_calls_due(calls: Sequence[C], unsent: int) -> tuple[list[C], int]:
    """S2: the calls that now go out whole (each gets COMPLETE, in order), and the first call
    still unsent. Calls go out whole as soon as they are, but never before an earlier call;
    ``unsent`` is the first call not yet OPEN, so that no delta scans the calls before it."""
    due: list[C] = []
    while unsent < len(calls):
        call = calls[unsent]
        if call.state is not OPEN:
            if call.state is not COLLECTING or not call.whole:
                break
            due.append(call)
        unsent += 1
    return due, unsent


def released_by(call: T, placeholders: Iterable[T]) -> list[T]:
    """S1: the held placeholders that go out as they are (END) once ``call`` moves on: those
    of every other call of the choice."""
    return [held for held in placeholders if held is not call]
