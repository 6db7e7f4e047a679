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

from proxy.core.transitions import next_state


class _Identity(Enum):
    """An Enum hashed by identity: its members are looked up once an item (Enum's own hash
    is a Python call on its name, twice a lookup of a pair)."""

    __hash__ = object.__hash__


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
    return next_state(RESPONSE, phase, step, "native Responses: no transition")


# -- an item's end, as the upstream and the proxy see it ---------------------------------------
#
# The proxy ends an item the upstream never ended (R3, the SGLang router's calls): the
# upstream's own closing events of it, if they still come, are dropped; the upstream's
# output_item.done marks it ended for finding later events. Either may come first, either may
# come again: the table is total, and an end that changes nothing keeps the phase.


class ItemEnd(_Identity):
    OPEN = "open"
    BY_PROXY = "by-proxy"  #: the proxy ended it; the upstream has not
    BY_UPSTREAM = "by-upstream"  #: its output_item.done came
    BY_BOTH = "by-both"  #: the proxy ended it, then its output_item.done came


class EndStep(_Identity):
    PROXY_ENDS = "proxy-ends"
    UPSTREAM_ENDS = "upstream-ends"


ITEM_END: Final[Mapping[tuple[ItemEnd, EndStep], ItemEnd]] = {
    (ItemEnd.OPEN, EndStep.PROXY_ENDS): ItemEnd.BY_PROXY,
    (ItemEnd.OPEN, EndStep.UPSTREAM_ENDS): ItemEnd.BY_UPSTREAM,
    (ItemEnd.BY_PROXY, EndStep.PROXY_ENDS): ItemEnd.BY_PROXY,
    (ItemEnd.BY_PROXY, EndStep.UPSTREAM_ENDS): ItemEnd.BY_BOTH,
    (ItemEnd.BY_UPSTREAM, EndStep.PROXY_ENDS): ItemEnd.BY_BOTH,
    (ItemEnd.BY_UPSTREAM, EndStep.UPSTREAM_ENDS): ItemEnd.BY_UPSTREAM,
    (ItemEnd.BY_BOTH, EndStep.PROXY_ENDS): ItemEnd.BY_BOTH,
    (ItemEnd.BY_BOTH, EndStep.UPSTREAM_ENDS): ItemEnd.BY_BOTH,
}
CLOSED_EARLY: Final = frozenset({ItemEnd.BY_PROXY, ItemEnd.BY_BOTH})
UPSTREAM_ENDED: Final = frozenset({ItemEnd.BY_UPSTREAM, ItemEnd.BY_BOTH})


# -- a client item's content: a message's part, a call's arguments ------------------------------
#
# A message's part opens (content_part.added, the upstream's or the proxy's) and ends
# (content_part.done); an added while one is open, or a done while none is, keeps the phase,
# as the upstream's event passes on regardless. A call's arguments end once for good.


class Content(_Identity):
    NO_PART = "no-part"  #: a message between parts, or a call whose arguments go on
    PART_OPEN = "part-open"  #: a message's part is open
    ARGS_DONE = "args-done"  #: a call's function_call_arguments.done went out


class ContentStep(_Identity):
    PART_ADDED = "part-added"
    PART_DONE = "part-done"
    ARGS_DONE = "args-done"


CONTENT: Final[Mapping[tuple[Content, ContentStep], Content]] = {
    (Content.NO_PART, ContentStep.PART_ADDED): Content.PART_OPEN,
    (Content.PART_OPEN, ContentStep.PART_ADDED): Content.PART_OPEN,
    (Content.PART_OPEN, ContentStep.PART_DONE): Content.NO_PART,
    (Content.NO_PART, ContentStep.PART_DONE): Content.NO_PART,
    (Content.NO_PART, ContentStep.ARGS_DONE): Content.ARGS_DONE,
    (Content.ARGS_DONE, ContentStep.ARGS_DONE): Content.ARGS_DONE,
}


def end_after(end: ItemEnd, step: EndStep) -> ItemEnd:
    return ITEM_END[end, step]  # total


def content_after(content: Content, step: ContentStep) -> Content:
    return next_state(CONTENT, content, step, "native Responses: no content transition")
