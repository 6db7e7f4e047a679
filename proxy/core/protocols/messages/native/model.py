"""One content block of a server's own Messages stream, as the native repairer follows it, and
one tool call of it."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from proxy.core.calls.record import CallRecord
from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.fail_open import FailOpen
from proxy.core.markup.jsonscan import JsonValue
from proxy.core.protocols.messages.native.lifecycle import BlockPhase
from proxy.core.protocols.think import LeadingThink
from proxy.core.sse import Event


class InputEnd:
    """Where a tool input's JSON object ends, fragment by fragment (constant work a fragment):
    an input that is complete cannot sensibly grow, so its block may be stopped early."""

    __slots__ = ("_broken", "_started", "_value")

    def __init__(self) -> None:
        self._value = JsonValue()
        self._started = False
        self._broken = False

    def feed(self, text: str) -> bool:
        """Take the next fragment; whether the input is now complete (as ``complete``, which
        a fragment's caller then need not ask)."""
        value = self._value
        if not (value.done or self._broken):
            if not self._started:
                text = text.lstrip()
                if not text:
                    return False
                self._started = True
            value.advance(text, 0, False)
            self._broken = value.error is not None
        return value.done and not self._broken

    @property
    def complete(self) -> bool:
        return self._value.done and not self._broken


#: an upstream event, its data (maybe repaired in place), and whether it was repaired
Item = tuple[Event, JSONObject, bool]


@dataclass(eq=False, slots=True)
class ToolCall(CallRecord):
    """One tool call of the stream: a tool_use block of the upstream's, or a call recovered
    from markup in a text block. Its state and argument text are the shared record's
    (proxy/core/calls/record.py); what only Messages knows is kept here."""

    #: the upstream's ``content_block_start``, written as the call's opening (None: a markup
    #: call, whose block the proxy writes)
    opening: Item | None = None
    opening_at: int = -1  #: the start's place among the upstream's events
    opening_held: bool = False  #: the start is held with the call (counted as held)
    #: the upstream's events of the call while it is held (a SUSPECT), in order
    held: list[Item] = field(default_factory=list)
    held_at: list[int] = field(default_factory=list)  #: their places among the upstream's
    #: the stream's events of no block (a ping) that came while the call was held, each with
    #: its place: they go out in that place among the call's events (heal_arguments holds a
    #: call from its start; a ping sent ahead of the start would reorder a valid stream)
    beside: list[tuple[int, Event, JSONObject]] = field(default_factory=list)


@dataclass(slots=True)
class UpstreamBlock:
    upstream: int  #: the index the server gave it (in the current generation)
    #: the index the client sees (of the latest client block it became; a tool block's is
    #: its call's, given by the call driver)
    index: int
    type: str
    end: InputEnd = field(default_factory=InputEnd)  #: where a tool block's input ends
    markup: FailOpen | None = None  #: a text block's markup parser
    call: ToolCall | None = None  #: a tool_use block's call
    #: the message's first text block under ``think_in_content``: its leading <think> block
    #: is split off (structure.py), its start held until the text says whether it has one
    think: LeadingThink | None = None
    think_start: Item | None = None
    phase: BlockPhase = BlockPhase.OPEN  #: where it is in its lifecycle (lifecycle.py BLOCK)


def input_parses(text: str) -> bool:
    """A tool input as the client rebuilds it: empty (``{}``) or a JSON object."""
    if not text.strip():
        return True
    try:
        return isinstance(orjson.loads(text), dict)
    except orjson.JSONDecodeError:
        return False


def extracts(request: JSONObject) -> bool:
    """Markup may become calls only when the client offered tools and did not forbid them."""
    choice = request.get("tool_choice")
    none = isinstance(choice, dict) and choice.get("type") == "none"
    return bool(request.get("tools")) and not none
