"""What the native repairer keeps per output item, and the one event it works on.

``Ev`` is one upstream event on its way out: its payload (a dict, changed in place by the
repairs) and its raw bytes, kept while nothing changed (``set`` drops them on a real change),
so that an event passed unchanged goes out byte for byte. ``Out`` is an item as the client
sees it (its position, id and what was streamed into it); ``Up`` is an item as the upstream
named it (by id and output_index, which may rotate or be missing) and the ``Out`` its events
go to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proxy.core.markup.fail_open import FailOpen
from proxy.core.protocols.responses.items import FunctionCallItem

JSONObject = dict[str, Any]


class Ev:
    __slots__ = ("payload", "raw", "up")

    def __init__(self, payload: JSONObject, raw: bytes | None) -> None:
        self.payload = payload
        self.raw = raw  # None once the payload differs from what came
        self.up: Up | None = None  # the item an output_item.added begins, once known

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
class Out:
    """An item as the client sees it."""

    index: int
    id: str
    type: str
    call_id: str = ""
    name: str = ""
    args: list[str] = field(default_factory=list)  # argument text streamed (calls)
    arg_deltas: bool = False
    args_done: bool = False
    text: list[str] = field(default_factory=list)  # text of the open part (messages)
    texts: list[str] = field(default_factory=list)  # text of each part done
    part_open: bool = False
    done: JSONObject | None = None  # the item as its output_item.done showed it
    synthetic: FunctionCallItem | None = None  # a call the proxy made out of markup
    compared: bool = False  # a call's arguments were compared with the call before it

    @property
    def arguments(self) -> str:
        return "".join(self.args)


@dataclass(eq=False, slots=True)
class Up:
    """An item as the upstream streams it."""

    type: str
    target: Out | None = None  # where its events go (None: not yet shown, or closed early)
    closed_early: bool = False  # the proxy ended it; the upstream's own closing is dropped
    queue: list[Ev] | None = None  # its events, held until its name is known (or, a suspect's,
    # until its arguments end: native_repeats.py)
    suspect: bool = False  # a call named like the call before it, held under dedupe_calls
    dropped: bool = False  # a repeat of the call before it: nothing of it goes out
    deferred: list[Ev] = field(default_factory=list)  # its opening, held until text shows
    extractor: FailOpen | None = None  # markup in its text becomes calls
    rewritten: bool = False  # text was taken out (markup): the done events are rewritten
    done: bool = False


def message_part(text: str) -> JSONObject:
    return {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
