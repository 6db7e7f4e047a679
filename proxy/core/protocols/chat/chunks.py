"""Chat-completion chunks at the edge: cheap looks at raw bytes.

The byte checks let the hot path decide whether an event needs a parse at all; they may
answer "maybe" for bytes that turn out not to matter (a parse then shows nothing to do),
never "no" for bytes that do (but for the one unlikely shape ``envelope_unsure`` names).
The JSON values themselves are proxy/core/jsonvalues.py's.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Final


@cache
def interest_pattern(text_keys: tuple[str, ...]) -> re.Pattern[bytes]:
    """A pattern found in the data of every chunk the normalizer may have to change: one with
    tool calls, a finish reason that is not null, an error, or text in ``text_keys`` (when
    markup extraction is on). One regex search in C costs less than any parse.

    It also finds a usage object (proxy/core/usage.py), which changes nothing but which the
    usage reader wants to see: ``uninteresting`` tells the two apart, so that one search
    answers both (a second search for the usage key was a tenth of a passed event's cost)."""
    alternatives = [
        rb'"tool_calls"',
        rb'"error"',
        rb'"finish_reason"[ \t\r\n]*+:[ \t\r\n]*+(?!null)',
        *(
            rb'"' + re.escape(key.encode()) + rb'"[ \t\r\n]*+:[ \t\r\n]*+"(?!")'
            for key in text_keys
        ),
        # no group: a named one made every search ten times slower
        rb'"usage"[ \t\r\n]*+:[ \t\r\n]*+\{',
    ]
    return re.compile(b"|".join(alternatives))


def uninteresting(pattern: re.Pattern[bytes], data: bytes) -> bool | None:
    """None when ``pattern`` (an ``interest_pattern``) finds something the normalizer may
    change in ``data``; else whether it found a usage object on the way."""
    found = pattern.search(data)
    usage = False
    while found is not None:
        if not data.startswith(b'"usage"', found.start()):
            return None
        usage = True
        found = pattern.search(data, found.end())
    return usage


_CHUNK_OBJECT: Final = re.compile(rb'"object"[ \t\r\n]*+:[ \t\r\n]*+"chat\.completion\.chunk"')


def envelope_unsure(data: bytes, *, one: bool = False) -> bool:
    """Whether a chunk may need its envelope repaired: it may not say ``"object":
    "chat.completion.chunk"`` (openai-python's stream helper drops such chunks), or one of its
    choices may lack a ``delta`` (Q29). The compact spelling costs one ``in`` test. Choices
    are counted by their ``index`` (tool-call entries have one too, but those chunks are
    parsed anyway); only a choice with neither, beside others that have both, goes unseen.
    ``one``: the chunk must also have one choice (one ``delta``, one ``index``), as
    ``role_first`` asks."""
    if b'"object":"chat.completion.chunk"' not in data and _CHUNK_OBJECT.search(data) is None:
        return True
    deltas = data.count(b'"delta"')
    if one:
        return deltas != 1 or data.count(b'"index"') != 1
    return deltas == 0 or deltas < data.count(b'"index"')


_ROLE_FIRST: Final = b'"delta":{"role":'


def role_first(data: bytes) -> bool:
    """Whether a chunk's delta begins with its role, the compact spelling (the first chunk
    of nearly every server): in a chunk of one choice, that choice's first delta has it. Any
    other spelling is parsed."""
    return _ROLE_FIRST in data


def envelopes_sure(data: bytes, events: int) -> bool:
    """``envelope_unsure`` answering no for each of ``events`` chunks at once (``data`` is their
    bytes, one after the other): every chunk names its object in the compact spelling and has
    one choice with a ``delta``. Counted over the whole, so a chunk could only hide behind
    another spelling a key twice, which no server does."""
    return (
        data.count(b'"object":"chat.completion.chunk"') == events
        and data.count(b'"delta"') == events
        and data.count(b'"index"') == events
    )
