"""Almost-JSON arguments made JSON, with json-repair, when nothing can have been cut off.

The shapes of issue 25 (trailing commas, single quotes, Python's ``True``/``None``, a raw
newline inside a string) come from servers and markup dialects that end a call with text a
JSON parser refuses. json-repair (bench/schema_check.py: right on all of them, as is the Rust
port fast-json-repair; dirtyjson and json5 miss Python literals or raw newlines) also completes
text that was cut off, which the proxy must never do: ``{"cmd": "rm -rf /tmp/build`` is not
``rm -rf /tmp/build`` but a command nobody knows. So the text is first read the lenient way
json-repair reads it (strings in either quote, brackets counted) and is healed only when its
first object closes exactly at its end. The caller adds the rest (the value fits the schema,
and the call was not cut by a token limit).

json-repair is pure Python, about 7 us a character: texts past ``HEAL_MAX_CHARS`` are left
alone so that one call cannot hold the event loop (8 KiB: some 60 ms on a busy machine).
"""

from __future__ import annotations

from typing import Final

import json_repair

HEAL_MAX_CHARS: Final = 8 << 10


def healed_value(text: str) -> dict[str, object] | None:
    """The object json-repair reads in ``text``, or None when the text is not a whole object
    (cut off, several values, not an object) or too long to heal."""
    if len(text) > HEAL_MAX_CHARS or not closed(text):
        return None
    try:
        value = json_repair.loads(text, skip_json_loads=True)
    # A repair library meets every kind of text; none of its failures is the client's.
    except Exception:
        return None
    return value if isinstance(value, dict) else None


def closed(text: str) -> bool:
    """Whether ``text`` is one object that closes exactly at its end, read leniently: strings
    in double or single quotes with backslash escapes, brackets of either kind counted."""
    body = text.strip()
    if not body.startswith("{"):
        return False
    depth = 0
    quote = ""
    escaped = False
    for position, char in enumerate(body):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return position == len(body) - 1
    return False
