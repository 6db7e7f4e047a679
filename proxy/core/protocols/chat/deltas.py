"""What one output piece of a choice says, as typed values: the chat encoder
(chat/render.py) alone turns them into delta objects, in the order a client has always seen.

Nothing edits a delta once it is built: a change (the fields of the chunk that held a call
put in front of its opening, a placeholder released without its ``{}``) builds a new value.
Fields the proxy does not know are carried as the upstream sent them, in their order
(``Fields``: never mutated once handed over).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Final

Fields = Mapping[str, object]

NO_FIELDS: Final[Fields] = {}  # shared: a Fields value is never mutated


@dataclass(frozen=True, slots=True)
class KeptDelta:
    """The upstream choice's delta as it was (or no delta object at all, Q29)."""


KEPT: Final = KeptDelta()


@dataclass(frozen=True, slots=True)
class FieldsDelta:
    """Any delta without a call: text, a role, unknown fields, in the order given."""

    fields: Fields


@dataclass(frozen=True, slots=True)
class Extras:
    """The fields of a call's entries the proxy does not know (``thought_signature``)."""

    entry: Fields  #: beside ``index`` and ``function``
    function: Fields  #: inside ``function``

    @staticmethod
    def of(entry: Fields, function: Fields) -> Extras | None:
        return Extras(entry, function) if entry or function else None


def added(earlier: Extras | None, later: Extras | None) -> Extras | None:
    """The fields of ``earlier`` with ``later``'s added, in ``dict.update``'s order."""
    if later is None or earlier is None:
        return later or earlier
    return Extras({**earlier.entry, **later.entry}, {**earlier.function, **later.function})


@dataclass(frozen=True, slots=True)
class OpeningDelta:
    """A call's opening: the entry with its id, type and name and the arguments known."""

    index: int
    id: str
    name: str | None  #: None when no name came and the request named none to fall back on
    arguments: str
    extras: Extras | None
    head: Fields | None  #: the other fields of the delta, in front of ``tool_calls``


@dataclass(frozen=True, slots=True)
class ArgsDelta:
    """A continuation of a call's arguments."""

    index: int
    text: str
    extras: Extras | None = None
    head: Fields | None = None  #: the other fields of the delta, in front of ``tool_calls``


Delta = KeptDelta | FieldsDelta | OpeningDelta | ArgsDelta


def with_head(delta: FieldsDelta | OpeningDelta | ArgsDelta, head: Fields) -> Delta:
    """``delta`` with the fields ``head`` in front of its own; a field in both keeps the
    place it has in ``head`` and the value it has in ``delta``."""
    if isinstance(delta, FieldsDelta):
        return FieldsDelta({**head, **delta.fields})
    merged = {**head, **delta.head} if delta.head else head
    return replace(delta, head=merged)
