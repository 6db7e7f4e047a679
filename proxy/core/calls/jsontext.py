"""The two questions asked of a call's argument text, whatever protocol carried it: is it one
complete JSON value, and is another text its beginning.

They live beside the calls rather than in a protocol package because the call state machine
asks them (proxy/core/calls/argtext.py).
"""

from __future__ import annotations

import orjson

from proxy.core.jsonvalues import INVALID


def complete_json(text: str) -> object:
    """The value when ``text`` is exactly one complete JSON object or array, else INVALID.

    A cheap look at the first and last significant characters comes first, so partial
    argument text (almost every fragment) costs no parse.
    """
    stripped = text.strip()
    if not stripped or (stripped[0], stripped[-1]) not in (("{", "}"), ("[", "]")):
        return INVALID
    try:
        return orjson.loads(stripped)
    except orjson.JSONDecodeError:
        return INVALID


def json_prefix_end(kept: str, fragment: str) -> int | None:
    """Where ``kept`` ends inside ``fragment``, matching JSON text with whitespace outside
    strings ignored on both sides; None when ``kept`` is not the fragment's beginning."""
    i = j = 0
    in_string = escaped = False
    n, m = len(kept), len(fragment)
    while i < n:
        c = kept[i]
        if not in_string and c in " \t\r\n":
            i += 1
            continue
        while j < m and not in_string and fragment[j] in " \t\r\n":
            j += 1
        if j >= m or fragment[j] != c:
            return None
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        i += 1
        j += 1
    return j
