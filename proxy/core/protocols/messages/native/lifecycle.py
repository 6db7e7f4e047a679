"""The lifecycles of a native Messages stream: its message's, and each content block's, as
one table each (the call states are proxy/core/calls/state.py's; these are what the stream
itself goes through).

Rules:

* the client sees one message: ``message_start`` first (made up when a block starts before
  it), its blocks, then ``message_delta`` (the stop reason; made up at ``message_stop`` or a
  clean end without one) and ``message_stop``, after which the message is over and every
  later byte passes as it came; an ``error`` event ends it as well;
* a ``message_delta`` may come before any start (the stream never started a message): that
  is a phase of its own, so that a start after it still knows the delta came;
* the ``message_delta`` is the upstream's last word on the message, whenever it came: held
  until the message's end (stream.py), so blocks after it keep the phase;
* a phase changes only by a transition of :data:`MESSAGE`; a missing one is a bug of the proxy
  (``NormalizerError``), never a guess;
* an upstream block is open from its ``content_block_start`` until its ``content_block_stop``
  or until the proxy stops it (the next block starts, the message ends), whichever comes
  first (:data:`BLOCK`); a delta of a block that is not open is dropped, counted, and the
  upstream's late stop of a block the proxy stopped is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Final

from proxy.core.transitions import next_state


class Phase(Enum):
    NEW = "new"  #: nothing of the message yet
    STARTED = "started"  #: message_start went out
    DELTA_FIRST = "delta-first"  #: a message_delta went out, no message_start yet
    FINISHING = "finishing"  #: message_start and a message_delta went out
    OVER = "over"  #: message_stop (or an error) went out: the message is over


class Step(Enum):
    START = "start"  #: a message_start goes out (the upstream's or the proxy's)
    DELTA = "delta"  #: a message_delta goes out
    STOP = "stop"  #: message_stop goes out
    ERROR = "error"  #: an error event goes out


MESSAGE: Final[Mapping[tuple[Phase, Step], Phase]] = {
    (Phase.NEW, Step.START): Phase.STARTED,
    (Phase.NEW, Step.DELTA): Phase.DELTA_FIRST,
    (Phase.STARTED, Step.DELTA): Phase.FINISHING,
    (Phase.DELTA_FIRST, Step.START): Phase.FINISHING,
    (Phase.DELTA_FIRST, Step.DELTA): Phase.DELTA_FIRST,
    (Phase.FINISHING, Step.DELTA): Phase.FINISHING,
    **{
        (phase, step): Phase.OVER
        for phase in Phase
        if phase is not Phase.OVER
        for step in (Step.STOP, Step.ERROR)
    },
}

#: the phases in which message_start went out, and those in which a message_delta did
STARTED: Final = frozenset({Phase.STARTED, Phase.FINISHING})
DELTA_SEEN: Final = frozenset({Phase.DELTA_FIRST, Phase.FINISHING})


def after(phase: Phase, step: Step) -> Phase:
    return next_state(MESSAGE, phase, step, "native Messages: no transition")


class _Identity(Enum):
    """An Enum hashed by identity (Enum's own hash is a Python call on the name)."""

    __hash__ = object.__hash__


class BlockPhase(_Identity):
    OPEN = "open"  #: streaming: its events go out
    STOPPED_BY_PROXY = "stopped-by-proxy"  #: the proxy stopped it; the upstream has not yet
    STOPPED = "stopped"  #: its content_block_stop came


class BlockStep(_Identity):
    PROXY_STOPS = "proxy-stops"  #: the next block starts, or the message ends
    UPSTREAM_STOPS = "upstream-stops"  #: its content_block_stop came


BLOCK: Final[Mapping[tuple[BlockPhase, BlockStep], BlockPhase]] = {
    (BlockPhase.OPEN, BlockStep.PROXY_STOPS): BlockPhase.STOPPED_BY_PROXY,
    (BlockPhase.OPEN, BlockStep.UPSTREAM_STOPS): BlockPhase.STOPPED,
    (BlockPhase.STOPPED_BY_PROXY, BlockStep.UPSTREAM_STOPS): BlockPhase.STOPPED,
    (BlockPhase.STOPPED, BlockStep.UPSTREAM_STOPS): BlockPhase.STOPPED,
}


def block_after(phase: BlockPhase, step: BlockStep) -> BlockPhase:
    return next_state(BLOCK, phase, step, "native Messages: no block transition")
