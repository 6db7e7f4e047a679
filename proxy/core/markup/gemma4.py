"""Gemma 4: ``call:NAME{...}`` between ``<|tool_call>`` and ``<tool_call|>``, in Gemma's own
object syntax (Google Gemma 4).

Checked against vLLM ``vllm/tool_parsers/gemma4_tool_parser.py`` (the format notes and the
examples of its ``_parse_gemma4_args``, and its tolerance of quoted keys) and the Gemma 4
cases of llama.cpp ``tests/test-chat.cpp`` (empty lists and dicts, ``-7``, ``1.5e10``)::

    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>,days:3,metric:true,
    options:{units:<|"|>C<|"|>},tags:[<|"|>a<|"|>,<|"|>b<|"|>]}<tool_call|>

Keys are bare (or quoted), ``<|"|>`` (one special token) opens and closes every string, and
other values are literals (``42``, ``true``, ``null``; vLLM also reads ``none`` and ``nil``).
Several calls follow each other without a separator, each in its own tags. The arguments are
rewritten into JSON as they arrive: strings stream, literals are given out once complete.
A bare value inside the tags is typed by the parameter's schema, and a string parameter's
bare value is read as in the stripped form below.

A server that skips special tokens drops the tags and the string delimiters (vLLM notes that
its ``/responses`` endpoint leaked ``call:fn{...}`` this way), leaving strings bare::

    call:get_weather{city:Paris, France,days:3}

That form is taken only at the start of the content, for a function and parameters the
request declared, and only where it parses one way, so such a call is held until its end. A
bare value is typed by the parameter's schema, and the value of a string parameter runs on
over ``,`` and ``}`` unless what follows is the next declared parameter (``,days:``) or the
end of the call (``}`` then the end of the content, a line break, ``<tool_call|>`` or the
next ``call:``). Anything else fails open.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import ClassVar, Final

import orjson

from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment
from proxy.core.markup.block import (
    DONE,
    WHITESPACE,
    Block,
    BlockParser,
    Broken,
    Dialect,
    Handler,
    expect,
)
from proxy.core.markup.jsonscan import any_name, json_string
from proxy.core.markup.params import Schema, declared_types, is_text, string_json, typed_json
from proxy.core.markup.scan import MarkerScanner

OPEN = "<|tool_call>"
CLOSE = "<tool_call|>"
CALL = "call:"
QUOTE = '<|"|>'
_QUOTE_END = MarkerScanner((QUOTE,))
_LITERAL_END = MarkerScanner((",", "}", "]"))
_CANDIDATE_END: Final = re.compile("[,}]")
_NULLS: Final = ("null", "none", "nil")
# After a candidate end of a bare string value: the next key (its name, then ':').
_NEXT_KEY: Final = re.compile(r"[ \t\r\n]*([^\s:,{}\[\]<>\"]*)([ \t\r\n]*)(:?)")
# What may follow the brace that ends a call whose strings lost their delimiters.
_AFTER_CALL: Final = (CLOSE, CALL, "\n", "\r")


def _name_char(char: str) -> bool:
    return char.isalnum() or char in "_-."


def _key_char(char: str) -> bool:
    return char not in WHITESPACE and char not in ':,{}[]<>"'


def literal_json(text: str, schema: Schema | None) -> str:
    """The JSON text of a bare value: typed by its schema when it has one, else read as a
    Gemma literal (a bare word that is none is a string)."""
    if declared_types(schema):
        return typed_json(text, schema)
    if text in ("true", "false"):
        return text
    if text.lower() in _NULLS:
        return "null"
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return string_json(text)
    return (
        text
        if isinstance(value, int | float) and not isinstance(value, bool)
        else string_json(text)
    )


class Gemma4Block(BlockParser):
    def __init__(self, marker: str, dialect: Gemma4) -> None:
        self._stripped = marker == CALL
        super().__init__(marker, "name" if self._stripped else "call")
        self._dialect = dialect
        self._accept = dialect.declared if self._stripped else any_name
        self._params: dict[str, Schema] = {}
        self._closers: list[str] = []  # the brackets still open, innermost last
        self._comma = False  # a ',' read, written before the next key or item
        self._schema: Schema | None = None  # the schema of the top-level value being read
        self._deferred: list[Segment] = []  # a stripped call's segments, until it is whole

    def emit(self, *segments: Segment) -> None:
        """A stripped call has no marker to vouch for it: it is given out only once it has
        parsed to its end, so that anything less fails open as text."""
        if not self._stripped:
            super().emit(*segments)
            return
        self._deferred += segments
        if any(isinstance(segment, CallClose) for segment in segments):
            deferred, self._deferred = self._deferred, []
            super().emit(*deferred)

    # -- the call ----------------------------------------------------------------------------

    def _name(self, final: bool) -> bool:
        name = self.name(_name_char, "{", final)
        if name is None:
            return False
        if not self._accept(name):
            raise Broken(f"{name!r} is not a function of this request")
        self.pos += 1
        self._params = self._dialect.schemas.get(name, {})
        self._closers = ["}"]
        self._comma = False
        self._deferred = []
        self.emit(CallOpen(name), CallArgs("{"))
        self.state = "key"
        return True

    def _end(self, final: bool) -> bool:
        tag = self.optional((CALL,) if self._stripped else (CLOSE,), final)
        if tag is None:
            return False
        self.state = "name" if tag == CALL else DONE
        return True

    # -- keys --------------------------------------------------------------------------------

    def _key_state(self, final: bool) -> bool:
        if not self.text_follows(final, "markup ended before a key"):
            return False
        rest = self.buf[self.pos :]
        if rest[0] == "}":
            return self._close_bracket()
        if rest.startswith(QUOTE):
            self.pos += len(QUOTE)
            self.state = "quoted_key"
            return True
        if not final and QUOTE.startswith(rest):
            return False
        if rest[0] == '"':
            got = json_string(self.buf, self.pos, final)
            if got is None:
                return False
            key, self.pos = got
            return self._got_key(key)
        bare = self.name(_key_char, ":" + WHITESPACE, final)
        return bare is not None and self._got_key(bare)

    def _quoted_key(self, final: bool) -> bool:
        key = self.gather(_QUOTE_END, final)
        return key is not None and self._got_key(key)

    def _got_key(self, key: str) -> bool:
        top = len(self._closers) == 1
        if top and self._stripped and self._params and key not in self._params:
            raise Broken(f"{key!r} is not a parameter of this function")
        self._schema = self._params.get(key) if top else None
        self.emit(CallArgs(self._separator() + string_json(key) + ": "))
        self.state = "colon"
        return True

    def _colon(self, final: bool) -> bool:
        self.skip_ws()
        if self.literal((":",), final) is None:
            return False
        self.state = "value"
        return True

    # -- values ------------------------------------------------------------------------------

    def _item(self, final: bool) -> bool:
        if not self.text_follows(final, "markup ended in a list"):
            return False
        if self.peek() == "]":
            return self._close_bracket()
        self._schema = None
        self.emit(CallArgs(self._separator()))
        self.state = "value"
        return True

    def _value(self, final: bool) -> bool:
        if not self.text_follows(final, "markup ended before a value"):
            return False
        rest = self.buf[self.pos :]
        if rest.startswith(QUOTE):
            self.pos += len(QUOTE)
            self.emit(CallArgs('"'))
            self.state = "string"
        elif not final and QUOTE.startswith(rest):
            return False
        elif rest[0] == '"':
            self.state = "json_string"
        elif rest[0] in "{[":
            self.pos += 1
            self._closers.append("}" if rest[0] == "{" else "]")
            self.emit(CallArgs(rest[0]))
            self.state = "key" if rest[0] == "{" else "item"
        elif len(self._closers) == 1 and is_text(self._schema) and self._schema is not None:
            self.emit(CallArgs('"'))
            self.state = "bare_string"
        else:
            self.state = "literal"
        return True

    def _string(self, final: bool) -> bool:
        text, found = self.until(_QUOTE_END, final)
        if text:
            self.emit(CallArgs(string_json(text)[1:-1]))
        if found is None:
            return bool(text)
        self.emit(CallArgs('"'))
        self.state = "after"
        return True

    def _json_string(self, final: bool) -> bool:
        got = json_string(self.buf, self.pos, final)
        if got is None:
            return False
        value, self.pos = got
        self.emit(CallArgs(string_json(value)))
        self.state = "after"
        return True

    def _literal(self, final: bool) -> bool:
        text = self.gather(_LITERAL_END, final)
        if text is None:
            return False
        self.pos -= 1  # the ',' or bracket that ended it is read by "after"
        text = text.strip(WHITESPACE)
        if not text:
            raise Broken("a key without a value")
        self.emit(CallArgs(literal_json(text, self._schema)))
        self.state = "after"
        return True

    def _bare_string(self, final: bool) -> bool:
        """A string parameter's value without delimiters: a ',' or '}' ends it only where
        what follows says so (see the module's docstring); the text before that streams."""
        buf, start, pos = self.buf, self.pos, self.pos
        while True:
            match = _CANDIDATE_END.search(buf, pos)
            if match is None:
                if final:
                    raise Broken("markup ended in a value")
                pos = len(buf)
                break
            at = match.start()
            ends = self._ends_value(at, final)
            if ends is None:
                pos = at
                break
            if ends:
                self._emit_text(buf[start:at])
                self.pos = at
                self.emit(CallArgs('"'))
                self.state = "after"
                return True
            pos = at + 1
        self._emit_text(buf[start:pos])
        self.pos = pos
        return pos > start

    def _ends_value(self, at: int, final: bool) -> bool | None:
        """Whether the ',' or '}' at ``at`` ends a bare string; None while undecided."""
        buf = self.buf
        if buf[at] == "}":
            rest = buf[at + 1 :].lstrip(" \t")
            if any(rest.startswith(tag) for tag in _AFTER_CALL) or (final and not rest):
                return True
            if not final and any(tag.startswith(rest) for tag in _AFTER_CALL):
                return None
            return False
        match = _NEXT_KEY.match(buf, at + 1)
        assert match is not None  # every part of the pattern may be empty
        if match.end() == len(buf) and not final:
            return None
        quoted = buf[match.start(1) :]
        if quoted.startswith(QUOTE):
            return True  # the next key, quoted
        if not final and quoted and QUOTE.startswith(quoted):
            return None
        key = match.group(1)
        return bool(match.group(3)) and bool(key) and (not self._params or key in self._params)

    def _emit_text(self, text: str) -> None:
        if text:
            self.emit(CallArgs(string_json(text)[1:-1]))

    def _after(self, final: bool) -> bool:
        if not self.text_follows(final, "markup ended after a value"):
            return False
        char = self.peek()
        if char == ",":
            self.pos += 1
            self._comma = True
            self.state = "key" if self._closers[-1] == "}" else "item"
            return True
        if char == self._closers[-1]:
            return self._close_bracket()
        raise Broken(f"unexpected {char!r} after a value")

    def _close_bracket(self) -> bool:
        self.pos += 1
        self._comma = False  # a trailing comma is dropped
        self.emit(CallArgs(self._closers.pop()))
        if self._closers:
            self.state = "after"
        else:
            self.emit(CallClose())
            self.state = "end"
        return True

    def _separator(self) -> str:
        sep, self._comma = ("," if self._comma else ""), False
        return sep

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "call": expect((CALL,), "name"),
        "name": _name,
        "key": _key_state,
        "quoted_key": _quoted_key,
        "colon": _colon,
        "item": _item,
        "value": _value,
        "string": _string,
        "json_string": _json_string,
        "literal": _literal,
        "bare_string": _bare_string,
        "after": _after,
        "end": _end,
    }


class Gemma4(Dialect):
    name = "gemma4"
    openers = (OPEN,)
    start_openers = (CALL,)

    def block(self, marker: str) -> Block:
        return Gemma4Block(marker, self)
