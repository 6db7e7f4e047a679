"""What the native repairer keeps per output item, and the one event it works on.

``WireEvent`` is one upstream event on its way out: its payload (a dict, changed in place by
the repairs) and its raw bytes, kept while nothing changed (``set`` drops them on a real
change), so that an event passed unchanged goes out byte for byte. ``ClientItem`` is an item
as the client sees it (its position, id and what was streamed into it); ``UpstreamItem`` is an
item as the upstream named it (by id and output_index, which may rotate or be missing) and the
``ClientItem`` its events go to (Messages says ``UpstreamBlock``). ``NativeCall`` is a function
call (the upstream's or one taken out of markup) as the shared ``Calls`` track it
(proxy/core/calls: its state is the table's, nothing here keeps one), with its ``opening`` and
the events it ``held``, named as Messages' ``ToolCall`` names them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.core.calls.record import CallRecord
from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.fail_open import FailOpen
from proxy.core.protocols.responses.items import FunctionCallItem
from proxy.core.protocols.responses.native.lifecycle import (
    Content,
    ContentStep,
    EndStep,
    ItemEnd,
    content_after,
    end_after,
)
from proxy.core.protocols.think import LeadingThink

# Read on every event: module names, not the enums' class attributes (a lookup through the
# class each time, and ``in`` a frozenset hashes an Enum in Python); lifecycle.py's
# CLOSED_EARLY and UPSTREAM_ENDED say the same, and a test holds them equal.
_ARGS_DONE, _PART_OPEN = Content.ARGS_DONE, Content.PART_OPEN
_BY_PROXY, _BY_UPSTREAM, _BY_BOTH = ItemEnd.BY_PROXY, ItemEnd.BY_UPSTREAM, ItemEnd.BY_BOTH


class WireEvent:
    __slots__ = ("came", "n", "payload", "raw", "up")

    def __init__(self, payload: JSONObject, raw: bytes | None, n: int = -1) -> None:
        self.payload = payload
        self.raw = raw  # None once the payload differs from what came
        self.came = raw  # the bytes it came as (None: an event of the proxy's)
        self.n = n  # its place among the upstream's events (-1: an event of the proxy's)
        self.up: UpstreamItem | None = None  # the item an output_item.added begins, once known

    @property
    def size(self) -> int:
        """Its size as it came, what holding it counts toward max_held_bytes."""
        return len(self.came) if self.came is not None else 0

    @property
    def type(self) -> str:
        return str(self.payload["type"])

    def get(self, key: str) -> Any:
        return self.payload.get(key)

    def set(self, key: str, value: object) -> bool:
        """Set ``key``; True when that changed the event (a new key goes after the others)."""
        if (
            key in self.payload
            and self.payload[key] == value
            and type(self.payload[key]) is type(value)
        ):
            return False
        self.payload[key] = value
        self.raw = None
        return True

    def changed(self) -> None:
        """A nested value was changed in place."""
        self.raw = None


@dataclass(eq=False, slots=True)
class ClientItem:
    """An item as the client sees it."""

    index: int
    id: str
    type: str
    call_id: str = ""
    name: str = ""
    call: NativeCall | None = None  # a function_call item's call (its argument text is there)
    text: list[str] = field(default_factory=list)  # text of the open part (messages)
    texts: list[str] = field(default_factory=list)  # text of each part done
    content: Content = Content.NO_PART  # its part or its arguments (lifecycle.py)
    done: JSONObject | None = None  # the item as its output_item.done showed it
    synthetic: FunctionCallItem | None = None  # a call the proxy made out of markup
    up: UpstreamItem | None = None  # the upstream item it shows (None: a call out of markup)

    @property
    def arguments(self) -> str:
        return self.call.text() if self.call is not None else ""

    @property
    def args_done(self) -> bool:
        """Its function_call_arguments.done went out."""
        return self.content is _ARGS_DONE

    @property
    def part_open(self) -> bool:
        return self.content is _PART_OPEN

    def step(self, step: ContentStep) -> None:
        self.content = content_after(self.content, step)


@dataclass(eq=False, slots=True)
class UpstreamItem:
    """An item as the upstream streams it."""

    type: str
    target: ClientItem | None = None  # where its events go (None: not yet shown, or closed early)
    end: ItemEnd = ItemEnd.OPEN  # who ended it (lifecycle.py)
    call: NativeCall | None = None  # a function_call item's call, once its added came through
    deferred: list[WireEvent] = field(default_factory=list)  # its opening, held until text shows
    extractor: FailOpen | None = None  # markup in its text becomes calls
    rewritten: bool = False  # text was taken out (markup): the done events are rewritten
    closing: bool = False  # its output_item.done came, even if it still waits to be read
    #: think_in_content: the first message's leading <think> block, while its text decides
    think: LeadingThink | None = None

    @property
    def closed_early(self) -> bool:
        """The proxy ended it; the upstream's own closing is dropped (``CLOSED_EARLY``)."""
        end = self.end
        return end is _BY_PROXY or end is _BY_BOTH

    @property
    def done(self) -> bool:
        """Its output_item.done came (``UPSTREAM_ENDED``)."""
        end = self.end
        return end is _BY_UPSTREAM or end is _BY_BOTH

    def ended(self, step: EndStep) -> None:
        self.end = end_after(self.end, step)


@dataclass(eq=False, slots=True)
class NativeCall(CallRecord):
    """A function call through the calls (calls.py), with the Responses events
    that make it up: the upstream's ``output_item.added`` (None for a call out of markup),
    the events of it that came while it was held (they go out behind its opening, as they
    came, or with the arguments the proxy fixed), and the item it became."""

    up: UpstreamItem | None = None
    opening: WireEvent | None = None
    item_id: str = ""  #: the item id of a call out of markup, drawn with its call_id
    held: list[WireEvent] = field(default_factory=list)
    out: ClientItem | None = None
    #: under heal/coerce, its ``output_item.done``, held with it until the response's end
    #: says whether a token limit cut it (calls.py)
    done: WireEvent | None = None
    item_cut: bool = False  #: that ``output_item.done`` said ``status: "incomplete"``
    ended: bool = False  #: its arguments ended, and it waits for the verdict only


def message_part(text: str) -> JSONObject:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
