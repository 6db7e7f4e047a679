"""Protocol-neutral stream events: what every wire protocol's stream says, in one vocabulary.

A protocol decoder turns its wire events (Chat Completions chunks, Responses events, Messages
events) into these; a protocol encoder turns these into its wire events. Translating a stream
(a Responses client over a chat-only upstream) is "decode chat, encode Responses".

The rules every decoder keeps and every encoder may rely on:

* One response a stream. ``Started`` comes first, once; ``Ended`` comes last, once.
* Calls are numbered by ``index`` densely from 0 in the order they open, whatever the wire
  called them. A call's ``CallOpened`` (final id and name) comes before its arguments, and its
  ``CallClosed`` after them; the arguments of the call are the concatenation of its
  ``ArgumentsDelta`` texts. Argument text of two calls may interleave (Chat Completions allows
  it): an encoder for a protocol whose items are sequential holds the later call until the
  earlier one closes.
* Text and reasoning come as deltas; their order relative to calls is the order they go out.
* ``Finished`` carries the stream's one finish reason, after every call has closed; ``Usage``
  may come before or after it.
* ``Ended(complete=False)``: the upstream's body broke off. An encoder then writes nothing
  more (the shell aborts the client's connection, so the client sees the cut and no faked
  success).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class FinishReason(StrEnum):
    """Why the model stopped, in Chat Completions' words (the other protocols map to these)."""

    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    LENGTH = "length"
    CONTENT_FILTER = "content_filter"


@dataclass(frozen=True, slots=True)
class Started:
    """The response begins. Fields the upstream did not give are None."""

    id: str | None = None
    model: str | None = None
    created: int | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class ReasoningDelta:
    text: str


@dataclass(frozen=True, slots=True)
class CallOpened:
    """A tool call begins, with its final id and name (an id is made when the upstream gave
    none; the client must see the upstream's id where there was one, so the next turn's tool
    result maps back to it)."""

    index: int
    id: str
    name: str


@dataclass(frozen=True, slots=True)
class ArgumentsDelta:
    index: int
    text: str


@dataclass(frozen=True, slots=True)
class CallClosed:
    """The call's arguments are complete (``complete=False``: they were cut off)."""

    index: int
    complete: bool = True


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    #: the upstream's usage object as it came, for fields a protocol can carry across
    raw: dict[str, Any] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class Finished:
    reason: FinishReason
    #: the stop sequence that ended the text, where the upstream named one
    stop_sequence: str | None = None


@dataclass(frozen=True, slots=True)
class Failed:
    """The upstream (or the proxy) reported an error inside the stream."""

    message: str
    type: str | None = None
    code: str | None = None


@dataclass(frozen=True, slots=True)
class Ended:
    """The end of the upstream's body: ``complete`` when it ended cleanly."""

    complete: bool


StreamEvent = (
    Started
    | TextDelta
    | ReasoningDelta
    | CallOpened
    | ArgumentsDelta
    | CallClosed
    | Usage
    | Finished
    | Failed
    | Ended
)
