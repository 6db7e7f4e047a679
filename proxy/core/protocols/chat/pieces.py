"""What the normalizer builds and keeps while it works through a stream.

A :class:`Piece` is one output delta of one choice, tied to the upstream chunk (:class:`Source`)
whose envelope it goes out in. A :class:`Call` is the record of one tool call as the client
sees it (proxy/core/calls/record.py) with the chat protocol's own fields. A held call owns
a :class:`Slot`: its place in the output, which later output waits behind. A :class:`Sink`
collects what one choice of one chunk produces.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from proxy.core.arguments.rules import CallRules
from proxy.core.calls.record import CallRecord
from proxy.core.calls.state import HELD
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.deltas import Delta, Extras, Fields
from proxy.core.sse import Event


@dataclass(eq=False, slots=True)
class Source:
    """One upstream chunk, as the envelope of whatever is sent from it."""

    event: Event
    chunk: JSONObject
    silent: bool = False  #: the chunk sent nothing of its own (everything in it was held)


@dataclass(frozen=True, eq=False, slots=True)
class Piece:
    """One output delta of one choice, with the upstream chunk and choice it goes out as.
    Built once: a change to it is a new piece (``dataclasses.replace``)."""

    source: Source
    choice: JSONObject
    delta: Delta
    finish: object = None


@dataclass(slots=True)
class StreamContext:
    """What the choices of one stream share."""

    coalesce: bool
    extract: tuple[str, ...]  #: text fields to run markup extraction on; () = off
    dialect_names: tuple[str, ...]
    tools: list[JSONObject]
    fallback_name: str | None  #: the name a nameless call must have, from the request
    ids: IdPool
    reasoning_dialect_names: tuple[str, ...] = ()  #: the dialects for reasoning text
    dedupe: bool = False  #: drop a call equal to the one before it (dedupe_calls)
    reasoning_field: str = "keep"  #: the field chat clients get reasoning in (chat/reasoning.py)
    think_in_content: bool = False  #: a leading <think> block in content is reasoning
    repairs: Counter[str] = field(default_factory=Counter)
    dropped: list[str] = field(default_factory=list)
    held: int = 0  #: characters held (held calls' arguments, text a dialect holds)
    kept: int = 0  #: argument characters of calls sent, kept for the checks
    finishes_held: int = 0  #: choices whose finish waits (chat/early_finish.py)
    rules: CallRules | None = None  #: what a call's arguments are asked at its end (issue 25)
    one_call: bool = False  #: parallel_tool_calls: false, enforced: calls past the first dropped


@dataclass(eq=False, slots=True, kw_only=True)
class Call(CallRecord):
    """A call with what only the chat protocol knows of it, beside its neutral record."""

    origin: Source  #: the chunk the call first appeared in
    origin_choice: JSONObject
    placeholder: Piece | None = None  #: S1: the opening held back with "{}"
    has_type: bool = False
    had_args_key: bool = False
    extras: Extras | None = None  #: the unknown fields of the entries so far
    slot: Slot | None = None  #: where the call's held output goes, once its chunk is done
    head: Fields | None = None  #: the other delta fields of a chunk that held the call


@dataclass(eq=False, slots=True)
class Slot:
    """The place in the output of a call held back: later output waits behind it."""

    pieces: list[Piece] = field(default_factory=list)
    done: bool = False


class Sink:
    """Where pieces go while one choice of one chunk (or the end of the stream) is handled."""

    __slots__ = ("holding", "late", "own", "source")

    def __init__(self, source: Source | None) -> None:
        self.source = source
        self.own: list[Piece] = []  # this chunk's own pieces
        self.late: list[Piece] = []  # pieces of no chunk (the end of the stream)
        self.holding: list[Call] = []  # calls that began to be held in this chunk

    def put(self, piece: Piece, call: Call | None = None) -> None:
        if piece.source is self.source:
            self.own.append(piece)
        elif call is not None and call.slot is not None:
            call.slot.pieces.append(piece)  # what a call held goes out where it was held
        else:
            self.late.append(piece)

    def new_slots(self) -> list[Slot]:
        """Slots for the calls this chunk left held, in the order they began."""
        slots = []
        for call in self.holding:
            if call.state in HELD and call.slot is None:
                call.slot = Slot()
                slots.append(call.slot)
        return slots
