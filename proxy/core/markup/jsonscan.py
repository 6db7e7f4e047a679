"""Incremental JSON for the dialects that write calls as JSON objects.

:class:`JsonValue` finds where one JSON value ends, a piece at a time, so that argument text
can be forwarded as it arrives: it follows strings, escapes and brackets and rejects what
cannot be JSON outside strings (``<`` ...); orjson checks the finished text.

:class:`JsonCall` reads one call object, ``{"name": "f", "arguments": {...}}`` (also
``"parameters"``, Llama's key), the members in any order, other members skipped. It opens
the call as soon as the name is complete and the dialect accepts it, and streams the
arguments object as the model's own text, sliced exactly; arguments that came before the
name wait for it. Arguments given as a JSON string holding an object are unwrapped; missing
arguments are ``{}``. :class:`JsonArgs` streams the arguments object of a call that the
markup around it already opened.

A :class:`JsonBlock` hands its buffer to one of them at a time (its ``part``); the state in
which the part reads gets its handler from :func:`json_part`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import ClassVar, Final

import orjson

from proxy.core.markup.base import CallArgs, CallClose, CallOpen
from proxy.core.markup.block import DONE, BlockParser, Broken, Handler, expect

_STRING_BODY: Final = re.compile(r'[^"\\]*')
_BORING: Final = re.compile(r"[\s,:0-9a-zA-Z.+\-]*")  # what may sit between tokens
_SCALAR: Final = re.compile(r"[0-9a-zA-Z.+\-]*")
_CLOSERS: Final = {"}": "{", "]": "["}
_STRING: Final = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)

ARGUMENT_KEYS: Final = ("arguments", "parameters")


class JsonValue:
    """Where one JSON value ends. ``advance`` returns the new position; ``done`` when ended.

    On text that cannot be JSON, ``advance`` stops at it and sets ``error``, so that what came
    before it can still be forwarded.
    """

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._started = False
        self._scalar = False
        self._in_string = False
        self._escape = False
        self.done = False
        self.error: str | None = None

    def advance(self, text: str, pos: int, final: bool) -> int:
        try:
            if not self._started and pos < len(text):
                pos = self._start(text, pos)
            while pos < len(text) and not self.done:
                if self._in_string:
                    pos = self._string(text, pos)
                elif self._scalar:
                    pos = _SCALAR.match(text, pos).end()  # type: ignore[union-attr]
                    self.done = pos < len(text)
                else:
                    pos = self._container(text, pos)
        except _Stop as stop:
            self.error = stop.reason
            return stop.at
        if final and self._scalar:
            self.done = True
        return pos

    def string_run(self, text: str) -> bool:
        """Whether ``text`` only continues the string being read: ``advance`` would take it
        whole and change no state."""
        return self._in_string and not self._escape and _STRING_BODY.fullmatch(text) is not None

    def _start(self, text: str, pos: int) -> int:
        self._started = True
        char = text[pos]
        if char in "{[":
            self._stack.append(char)
        elif char == '"':
            self._in_string = True
        elif char in "-0123456789tfn":
            self._scalar = True
            return pos
        else:
            raise _Stop(f"{char!r} cannot start a JSON value", pos)
        return pos + 1

    def _string(self, text: str, pos: int) -> int:
        if self._escape:
            self._escape = False
            return pos + 1
        pos = _STRING_BODY.match(text, pos).end()  # type: ignore[union-attr]
        if pos < len(text):
            if text[pos] == "\\":
                self._escape = True
            else:
                self._in_string = False
                self.done = not self._stack
            pos += 1
        return pos

    def _container(self, text: str, pos: int) -> int:
        pos = _BORING.match(text, pos).end()  # type: ignore[union-attr]
        if pos == len(text):
            return pos
        char = text[pos]
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._stack.append(char)
        elif char in _CLOSERS:
            if self._stack.pop() != _CLOSERS[char]:
                raise _Stop(f"unbalanced {char!r} in JSON", pos)
            self.done = not self._stack
        else:
            raise _Stop(f"{char!r} outside a JSON string", pos)
        return pos + 1


class _Stop(Exception):
    def __init__(self, reason: str, at: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.at = at


def json_string(text: str, pos: int, final: bool) -> tuple[str, int] | None:
    """A complete JSON string at ``pos``: its value and end; None while it may continue."""
    if pos >= len(text):
        if final:
            raise Broken("expected a JSON string, got the end")
        return None
    if text[pos] != '"':
        raise Broken(f"expected a JSON string, got {text[pos : pos + 1]!r}")
    match = _STRING.match(text, pos)
    if match is None:
        if final:
            raise Broken("unterminated JSON string")
        return None
    try:
        value = orjson.loads(match.group())
    except orjson.JSONDecodeError as exc:
        raise Broken(f"bad JSON string: {exc}") from None
    assert isinstance(value, str)
    return value, match.end()


def json_object_text(text: str) -> str:
    """``text`` if it is a JSON object; raises otherwise."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise Broken(f"arguments are not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise Broken("arguments are not a JSON object")
    return text


class JsonCall:
    """One ``{"name": ..., "arguments": ...}`` object, parsed on its block's buffer and cursor.

    ``step`` returns True when it moved on and False when it needs more text; it emits the
    call's segments through the block, and ``done`` is set once the object is closed.
    """

    def __init__(
        self, block: BlockParser, accept_name: Callable[[str], bool], brace_taken: bool = False
    ) -> None:
        self._block = block
        self._accept = accept_name
        self._state = "key" if brace_taken else "open"
        self._key: str | None = None
        self._value: JsonValue | None = None
        self._name: str | None = None
        self._args: list[str] = []  # all argument text, checked at the end
        self._held_args: list[str] = []  # argument text that came before the name
        self._args_seen = False
        self.done = False

    def step(self, final: bool) -> bool:
        block = self._block
        if self._value is None:
            block.skip_ws()
        if block.at_end() and not (final and self._value is not None):
            if final:
                raise Broken(f"call object ended early (in {self._state})")
            return False
        char = block.peek()
        if self._state == "open":
            if char != "{":
                raise Broken(f"expected a JSON object, got {block.peek()!r}")
            block.pos += 1
            self._state = "key"
        elif self._state == "key":
            if char == "}":
                block.pos += 1
                return self._finish()
            got = json_string(block.buf, block.pos, final)
            if got is None:
                return False
            self._key, block.pos = got
            self._state = "colon"
        elif self._state == "colon":
            if char != ":":
                raise Broken(f"expected ':' in the call object, got {char!r}")
            block.pos += 1
            self._state = "value"
        elif self._state == "value":
            return self._member(final)
        elif char == ",":  # state "after"
            block.pos += 1
            self._state = "key"
        elif char == "}":
            block.pos += 1
            return self._finish()
        else:
            raise Broken(f"expected ',' or '}}' in the call object, got {char!r}")
        return True

    def _member(self, final: bool) -> bool:
        block = self._block
        wants_args = self._key in ARGUMENT_KEYS and not self._args_seen
        if self._value is None and self._key == "name" and self._name is None:
            got = json_string(block.buf, block.pos, final)
            if got is None:
                return False
            name, block.pos = got
            if not name or not self._accept(name):
                raise Broken(f"{name!r} is not a function of this request")
            self._name = name
            block.emit(CallOpen(name), *map(CallArgs, self._held_args))
            self._held_args = []
            self._state = "after"
            return True
        if self._value is None and wants_args and block.peek() == '"':
            got = json_string(block.buf, block.pos, final)
            if got is None:
                return False
            inner, block.pos = got
            self._arguments(json_object_text(inner))
            self._args_seen = True
            self._state = "after"
            return True
        if self._value is None:
            if wants_args and block.peek() != "{":
                raise Broken("arguments are not a JSON object")
            self._value = JsonValue()
        start = block.pos
        end = self._value.advance(block.buf, start, final)
        block.pos = end
        if wants_args:
            self._arguments(block.buf[start:end])
        if self._value.error:
            raise Broken(self._value.error)
        if self._value.done:
            self._value = None
            self._args_seen = self._args_seen or wants_args
            self._state = "after"
            return True
        return end > start

    def takes_run(self, text: str) -> bool:
        """Whether ``text`` only continues a string in the arguments of the named call, which
        ``step`` would read whole and emit as one argument piece, changing nothing else; if
        so it is taken so."""
        value = self._value
        if (
            value is None
            or self._name is None
            or self._state != "value"
            or self._args_seen
            or self._key not in ARGUMENT_KEYS
            or not value.string_run(text)
        ):
            return False
        self._args.append(text)
        self._block.emit_args(text)  # the call is open: it has its name
        return True

    def _arguments(self, piece: str) -> None:
        self._args.append(piece)
        if self._name is not None:
            self._block.emit(CallArgs(piece))
        else:
            self._held_args.append(piece)

    def _finish(self) -> bool:
        if self._name is None:
            raise Broken("call object without a name")
        if not self._args_seen:
            self._arguments("{}")
        self.done = True
        try:
            json_object_text("".join(self._args))
        except Broken as exc:
            self._block.emit(CallClose(error=str(exc)))
        else:
            self._block.emit(CallClose())
        return True


class JsonArgs:
    """The arguments object of a call already open, streamed as it arrives; closes the call."""

    def __init__(self, block: BlockParser) -> None:
        self._block = block
        self._value: JsonValue | None = None
        self._parts: list[str] = []
        self.done = False

    def takes_run(self, text: str) -> bool:
        """As :meth:`JsonCall.takes_run`."""
        value = self._value
        if value is None or self.done or not value.string_run(text):
            return False
        self._parts.append(text)
        self._block.emit_args(text)
        return True

    def step(self, final: bool) -> bool:
        block = self._block
        if self._value is None:
            if not block.text_follows(final, "markup ended before the arguments"):
                return False
            if block.peek() != "{":
                raise Broken("arguments are not a JSON object")
            self._value = JsonValue()
        start = block.pos
        end = self._value.advance(block.buf, start, final)
        block.pos = end
        self._parts.append(block.buf[start:end])
        block.emit(CallArgs(block.buf[start:end]))
        if self._value.error:
            raise Broken(self._value.error)
        if not self._value.done:
            return end > start
        self.done = True
        try:
            json_object_text("".join(self._parts))
        except Broken as exc:
            block.emit(CallClose(error=str(exc)))
        else:
            block.emit(CallClose())
        return True


class JsonBlock(BlockParser):
    """A block whose calls, or their arguments, are JSON read by a part on its buffer."""

    part: JsonCall | JsonArgs

    def takes_run(self, text: str) -> bool:
        """A run of ordinary string characters inside the open call's arguments, taken as
        ``feed`` would take it: the part reads and emits it, and it is trimmed into the
        call's kept text. Inside a call ``_trim`` leaves in ``buf`` only what was not read,
        so an empty ``buf`` is everything fed read, and the part is in the state that reads
        it (a part leaves its state only once done)."""
        if not self.open or self.buf or not text or not self.part.takes_run(text):
            return False
        self._kept.append(text)
        self._kept_len += len(text)
        return True

    def read_part(self, then: str, final: bool) -> bool:
        """Let the part read; once it is done, go on to ``then``."""
        moved = self.part.step(final)
        if self.part.done:
            self.state = then
        return moved

    def start_call(self, accept_name: Callable[[str], bool]) -> bool:
        """A call object starts at the cursor: read it in state "call"."""
        self.part = JsonCall(self, accept_name)
        self.state = "call"
        return True

    def call_object(self, final: bool) -> bool:
        """The handler of a list's "item" state: the next call object, of any name."""
        if not self.text_follows(final, "markup ended before a call object"):
            return False
        return self.start_call(any_name)


def json_part(then: str) -> Handler:
    """The handler of a state in which the block's part reads, going on to ``then``."""

    def handler(block: JsonBlock, final: bool) -> bool:
        return block.read_part(then, final)

    return handler


def any_name(name: str) -> bool:
    """Behind a marker of its own, markup may call any function."""
    return True


class JsonArrayBlock(JsonBlock):
    """A block holding a JSON array of call objects: ``[{...}, {...}]``."""

    def __init__(self, marker: str, state: str = "array") -> None:
        super().__init__(marker, state)

    def _next(self, final: bool) -> bool:
        self.skip_ws()
        sep = self.literal((",", "]"), final)
        if sep is None:
            return False
        self.state = "item" if sep == "," else DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "array": expect(("[",), "item"),
        "item": JsonBlock.call_object,
        "call": json_part("next"),
        "next": _next,
    }
