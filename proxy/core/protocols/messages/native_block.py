"""One content block of a server's own Messages stream, as the native repairer follows it."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson

from proxy.core.markup.fail_open import FailOpen
from proxy.core.markup.jsonscan import JsonValue
from proxy.core.protocols.chat.chunks import JSONObject
from proxy.core.sse import Event


class InputEnd:
    """Where a tool input's JSON object ends, fragment by fragment (constant work a fragment):
    an input that is complete cannot sensibly grow, so its block may be stopped early."""

    __slots__ = ("_broken", "_started", "_value")

    def __init__(self) -> None:
        self._value = JsonValue()
        self._started = False
        self._broken = False

    def feed(self, text: str) -> None:
        if self._value.done or self._broken:
            return
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        self._value.advance(text, 0, False)
        self._broken = self._value.error is not None

    @property
    def complete(self) -> bool:
        return self._value.done and not self._broken


@dataclass(slots=True)
class Block:
    upstream: int  #: the index the server gave it (in the current generation)
    index: int  #: the index the client sees (of the latest client block it became)
    type: str
    pieces: list[str] = field(default_factory=list)  #: a tool input's fragments
    end: InputEnd = field(default_factory=InputEnd)
    markup: FailOpen | None = None  #: a text block's markup parser
    stopped: bool = False
    name: object = None  #: a tool block's name, or a text block's latest markup call's
    #: a suspect's events (event, payload, changed), held until its input ends (dedupe_calls)
    held: list[tuple[Event, JSONObject, bool]] | None = None
    settled: bool = False  #: a tool block's input ended and was compared with the call before
    dropped: bool = False  #: a repeat of the call before it: nothing more of it goes out
    call: JSONObject | None = None  #: the block of a suspect markup call in this text, held

    def holds(self, event: Event, payload: JSONObject, changed: bool) -> bool:
        """Whether an event of this block stays back: a suspect's, or a dropped repeat's."""
        if self.held is not None:
            self.held.append((event, payload, changed))
        return self.held is not None or self.dropped

    def add_input(self, text: str) -> None:
        self.pieces.append(text)
        self.end.feed(text)

    @property
    def input_parses(self) -> bool:
        return input_parses("".join(self.pieces))


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
