"""The lifecycle of a native Responses stream's response, as one table (the call states are
proxy/core/calls/state.py's; this is what the stream itself goes through).

Rules:

* the client sees one response, ``response.created`` first (made up when the upstream sent
  another event first), then ``response.in_progress`` (the upstream's, or made up before the
  first other event), then its terminal event, after which the response is over: a later
  event is dropped, counted;
* a phase changes only by a transition of :data:`RESPONSE`; a missing one is a bug of the
  proxy (``NormalizerError``), never a guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Final

from proxy.core.errors import NormalizerError


class Phase(Enum):
    NEW = "new"  #: nothing went out yet
    CREATED = "created"  #: response.created went out
    IN_PROGRESS = "in-progress"  #: response.in_progress went out
    OVER = "over"  #: the terminal event went out: the response is over for the client


class Step(Enum):
    CREATED = "created"  #: the response.created that goes out
    IN_PROGRESS = "in-progress"  #: the response.in_progress that goes out
    TERMINAL = "terminal"  #: response.completed, .incomplete or .failed went out


RESPONSE: Final[Mapping[tuple[Phase, Step], Phase]] = {
    (Phase.NEW, Step.CREATED): Phase.CREATED,
    (Phase.CREATED, Step.IN_PROGRESS): Phase.IN_PROGRESS,
    (Phase.IN_PROGRESS, Step.TERMINAL): Phase.OVER,
}


def after(phase: Phase, step: Step) -> Phase:
    try:
        return RESPONSE[phase, step]
    except KeyError:
        raise NormalizerError(f"native Responses: no transition from {phase} on {step}") from None
