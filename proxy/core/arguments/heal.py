"""Almost-JSON arguments made the JSON they mean, when nothing can have been cut off.

The shapes of issue 25 (trailing commas, single quotes, Python's ``True``/``False``/``None``, a
raw newline or tab inside a string) come from servers and markup dialects that end a call with
text a JSON parser refuses. Each is rewritten the one way it can mean, and the result is then
read by orjson, so every escape means exactly what JSON says; anything else broken (a missing
comma, a comment, an unquoted key) stays unread and the call is left as it came.

Why not json-repair: bench/schema_check.py measured it (and its Rust port) on these shapes.
It fixes them, but it also changes what strings say: ``{"content": "line\\n",}`` loses the
newline, ``\\/`` and ``\\f`` stay a backslash and a letter, a surrogate pair becomes two lone
halves; and it completes cut-off text. A tool's arguments are a command or a file's content:
a heal must give the value that was meant or nothing. dirtyjson and json5 read strings
exactly but miss Python's literals or raw newlines.

Truncation is never healed, and needs no rule of its own: a text cut inside a string has no
closing quote, and one cut anywhere else leaves an object orjson cannot close. Nor is text
around the object (prose, a code fence, a second object): orjson reads one value and no more.
"""

from __future__ import annotations

import re
from typing import Final

import orjson

#: the rewrite is linear, 0.06 to 0.35 us a character (the more tokens and raw newlines, the
#: slower): past this a call is left as it came, so that one heal holds the loop 20 ms at most
HEAL_MAX_CHARS: Final = 64 << 10

_PLAIN: Final = re.compile(r"[^\"',A-Za-z0-9_\-]+")  # brackets, colons, whitespace
_NUMBER: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_WORD: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_WORDS: Final = {
    "true": "true",
    "false": "false",
    "null": "null",
    "True": "true",
    "False": "false",
    "None": "null",
}
_SPACE: Final = re.compile(r"[ \t\r\n]*")
_RUN: Final = {
    '"': re.compile(r"[^\"\\\x00-\x1f]+"),
    "'": re.compile(r"[^'\"\\\x00-\x1f]+"),
}
_CONTROL: Final = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def healed_value(text: str) -> dict[str, object] | None:
    """The object ``text`` means, or None when it is not one whole object in the shapes
    above (cut off, several values, broken some other way) or too long to heal."""
    if len(text) > HEAL_MAX_CHARS:
        return None
    rewritten = as_json(text)
    if rewritten is None:
        return None
    try:
        value = orjson.loads(rewritten)
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def as_json(text: str) -> str | None:
    """``text`` with the shapes rewritten as JSON; None where a string does not end."""
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char in "\"'":
            end = _string(text, i, out)
            if end is None:
                return None
            i = end
        elif char == ",":
            after = _SPACE.match(text, i + 1)
            assert after is not None  # the pattern matches the empty string
            if after.end() >= n or text[after.end()] not in "}]":
                out.append(",")  # a trailing comma (one before a closing bracket) is dropped
            i += 1
        elif (number := _NUMBER.match(text, i)) is not None:
            out.append(number.group())
            i = number.end()
        elif (word := _WORD.match(text, i)) is not None:
            out.append(_WORDS.get(word.group(), word.group()))  # others: orjson refuses them
            i = word.end()
        else:
            plain = _PLAIN.match(text, i)
            end = plain.end() if plain is not None else i + 1
            out.append(text[i:end])
            i = end
    return "".join(out)


def _string(text: str, start: int, out: list[str]) -> int | None:
    """Write the string starting at ``start`` as a JSON string; where it ended, or None."""
    quote = text[start]
    run = _RUN[quote]
    parts = ['"']
    i, n = start + 1, len(text)
    while i < n:
        char = text[i]
        if char == quote:
            parts.append('"')
            out.append("".join(parts))
            return i + 1
        if char == "\\":
            if i + 1 >= n:
                return None
            escaped = text[i + 1]
            # \' is no JSON escape: in a single-quoted string it is the quote itself
            parts.append("'" if escaped == "'" else text[i : i + 2])
            i += 2
        elif char == '"':  # only in a single-quoted string
            parts.append('\\"')
            i += 1
        elif char < " ":  # a raw control character: what the escape says
            parts.append(_CONTROL.get(char, f"\\u{ord(char):04x}"))
            i += 1
        else:
            found = run.match(text, i)
            assert found is not None  # char is none of the characters the run stops at
            parts.append(found.group())
            i = found.end()
    return None
