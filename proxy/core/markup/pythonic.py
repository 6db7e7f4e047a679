"""Pythonic: a Python list of calls with keyword arguments (Llama 3.2, Llama 4, others).

The Llama 3.2 pythonic template (vLLM ``examples/tool_chat_template_llama3.2_pythonic.jinja``;
``...llama4_pythonic.jinja``) asks to "respond in the format [func_name1(params_name1=
params_value1, params_name2=params_value2...), func_name2(params)]"; Llama 4 may wrap the list
in ``<|python_start|>`` ... ``<|python_end|>``::

    [get_weather(city="Paris", days=3), get_time(zone='CET', exact=True)]

Values are Python literals. They are read, never run: each value's text is cut out by a
small tokenizer (quotes, brackets) and handed to :func:`ast.literal_eval`, which accepts
literals only (JSON's ``true``/``false``/``null`` are accepted too). The list is looked for
only at the start of the content, and only with functions the request declared, so ``[1]``
or ``[see(a=1)]`` in an answer stays text.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final

import orjson

from proxy.core.markup.base import CallArgs, CallClose, CallOpen
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
from proxy.core.markup.params import ArgsWriter

LIST = "["
PYTHON_START = "<|python_start|>"
PYTHON_END = "<|python_end|>"
_OPENERS: Final = "([{"
_CLOSERS: Final = {")": "(", "]": "[", "}": "{"}


def _name_char(char: str) -> bool:
    return char.isalnum() or char in "_."


def literal_json(text: str) -> str:
    """The JSON text of a Python (or JSON) literal; raises Broken for anything else."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise Broken(f"{text[:40]!r} is not a literal") from None
    return orjson.dumps(_plain(value)).decode()


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float) and math.isfinite(value):
        return value
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, dict) and all(isinstance(key, str) for key in value):
        return {key: _plain(item) for key, item in value.items()}
    raise Broken(f"{type(value).__name__} has no JSON form")


class UnbalancedAt(Broken):
    """A closing bracket that matches nothing, at ``pos`` of the scanned text."""

    def __init__(self, char: str, pos: int) -> None:
        super().__init__(f"unbalanced {char!r}")
        self.pos = pos


class ValueScanner:
    """Finds where a Python literal ends: at a ``,`` or ``)`` outside strings and brackets."""

    def __init__(self) -> None:
        self._stack: list[str] = []
        self._quote = ""
        self._escape = False

    def advance(self, text: str, pos: int) -> tuple[int, str | None]:
        """The new position and the ending character found there (not consumed), if any."""
        while pos < len(text):
            char = text[pos]
            if self._quote:
                if self._escape:
                    self._escape = False
                elif char == "\\":
                    self._escape = True
                elif text.startswith(self._quote, pos):
                    pos += len(self._quote)
                    self._quote = ""
                    continue
                elif len(self._quote) == 3 and self._quote.startswith(text[pos:]):
                    return pos, None  # maybe the closing triple quote, cut
                pos += 1
                continue
            if char in "\"'":
                if len(text) - pos < 3 and text[pos:] == char * (len(text) - pos):
                    return pos, None  # '' or a triple quote: the next character decides
                self._quote = char * 3 if text.startswith(char * 3, pos) else char
                pos += len(self._quote)
                continue
            if char in _OPENERS:
                self._stack.append(char)
            elif char in _CLOSERS:
                if not self._stack:
                    if char == ")":
                        return pos, char
                    raise UnbalancedAt(char, pos)
                if self._stack.pop() != _CLOSERS[char]:
                    raise UnbalancedAt(char, pos)
            elif char == "," and not self._stack:
                return pos, char
            pos += 1
        return pos, None


class PythonicBlock(BlockParser):
    """The list of calls; ``accept`` says which names may be called, ``end`` is the optional
    tag after the list (LFM2 reuses the block with its own tags)."""

    def __init__(self, marker: str, accept: Callable[[str], bool], end: str = PYTHON_END) -> None:
        super().__init__(marker, "call_name" if marker == LIST else "list")
        self._accept = accept
        self._end_tag = end
        self._writer = ArgsWriter()
        self._function = ""
        self._key = ""
        self._value = ValueScanner()
        self._parts: list[str] = []

    def _call_name(self, final: bool) -> bool:
        self.skip_ws()
        name = self.name(_name_char, WHITESPACE + "(", final)
        if name is None:
            return False
        self._function = name
        self.state = "paren"
        return True

    def _paren(self, final: bool) -> bool:
        self.skip_ws()
        if self.literal(("(",), final) is None:
            return False
        if not self._accept(self._function):
            raise Broken(f"{self._function!r} is not a function of this request")
        self._writer = ArgsWriter()
        self.emit(CallOpen(self._function), CallArgs(self._writer.start()))
        self.state = "arg_key"
        return True

    def _arg_key(self, final: bool) -> bool:
        self.skip_ws()
        if self.peek() == ")":
            self.pos += 1
            return self._close_call()
        key = self.name(_name_char, WHITESPACE + "=", final)
        if key is None:
            return False
        self._key = key
        self.state = "equals"
        return True

    def _equals(self, final: bool) -> bool:
        self.skip_ws()
        if self.literal(("=",), final) is None:
            return False
        self._value = ValueScanner()
        self._parts = []
        self.state = "arg_value"
        return True

    def _arg_value(self, final: bool) -> bool:
        start = self.pos
        try:
            end, ending = self._value.advance(self.buf, start)
        except UnbalancedAt as exc:
            # Take the value up to the bad bracket whatever the cut, so the partial value
            # and the text given back do not depend on how the stream was split.
            self._parts.append(self.buf[start : exc.pos])
            self.pos = exc.pos
            raise
        self._parts.append(self.buf[start:end])
        self.pos = end
        if ending is None:
            return end > start
        self.pos += 1
        value = literal_json("".join(self._parts).strip(WHITESPACE))
        self.emit(CallArgs(self._writer.key(self._key) + value))
        if ending == ",":
            self.state = "arg_key"
            return True
        return self._close_call()

    def _close_call(self) -> bool:
        self.emit(CallArgs(self._writer.end()))
        self.emit(CallClose())
        self.state = "after_call"
        return True

    def _after_call(self, final: bool) -> bool:
        self.skip_ws()
        sep = self.literal((",", "]"), final)
        if sep is None:
            return False
        self.state = "call_name" if sep == "," else "end"
        return True

    def _end(self, final: bool) -> bool:
        if self.optional((self._end_tag,), final) is None:
            return False
        self.state = DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "list": expect((LIST,), "call_name"),
        "call_name": _call_name,
        "paren": _paren,
        "arg_key": _arg_key,
        "equals": _equals,
        "arg_value": _arg_value,
        "after_call": _after_call,
        "end": _end,
    }


class Pythonic(Dialect):
    name = "pythonic"
    start_openers = (LIST, PYTHON_START)

    def block(self, marker: str) -> Block:
        return PythonicBlock(marker, self.declared)
