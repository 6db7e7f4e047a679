"""Qwen3-Coder: XML-like function and parameter tags (Qwen3-Coder, Qwen3.5 and later Qwen).

The Qwen3-Coder chat template (``chat_template.jinja`` of Qwen/Qwen3-Coder-30B-A3B-Instruct;
vLLM ``examples/tool_chat_template_qwen3coder.jinja``) renders each call as::

    <tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    <parameter=days>
    3
    </parameter>
    </function>
    </tool_call>

with ``'<parameter=' + name + '>\\n'``, the value, ``'\\n</parameter>\\n'``: the newline after the
opening tag and the one before the closing tag are the template's, not the value's. Strings
are written as they are, mappings and lists as JSON, other values with ``| string``
(``3``, ``True``), so the values are typed by the request's schema (proxy.core.markup.params):
the example gives ``{"city": "Paris", "days": 3}`` when ``days`` is an integer.

Models also leave the ``<tool_call>`` wrapper out and write ``<function=NAME>`` alone, which
is recognised too. A value ends at the first ``</parameter>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, Block, Broken, Dialect, Handler, expect, name_char
from proxy.core.markup.scan import MarkerScanner
from proxy.core.markup.xmlcall import ParamsBlock

OPEN = "<tool_call>"
FUNCTION = "<function="
PARAMETER = "<parameter="
END_FUNCTION = "</function>"
CLOSE = "</tool_call>"
_VALUE_END = MarkerScanner(("\n</parameter>", "</parameter>"))


class Qwen3CoderBlock(ParamsBlock):
    CLOSE: ClassVar[str] = CLOSE  # the wrapper's end (Seed-OSS has its own wrapper)

    def __init__(self, marker: str, dialect: Dialect) -> None:
        wrapped = marker != FUNCTION
        super().__init__(marker, "enter" if wrapped else "function", dialect.schemas)
        self._wrapped = wrapped
        self._callee = ""

    def _function(self, final: bool) -> bool:
        name = self.name(name_char, ">", final)
        if name is None:
            return False
        self.pos += 1
        self._callee = name
        self.state = "confirm"
        return True

    def _confirm(self, final: bool) -> bool:
        # The call opens only once a tag confirms that this was a call, not prose.
        return self._param(final, first=True)

    def _param(self, final: bool, first: bool = False) -> bool:
        self.skip_ws()
        tag = self.literal((PARAMETER, END_FUNCTION), final)
        if tag is None:
            return False
        if first:
            self.open_call(self._callee)
        if tag == END_FUNCTION:
            self.close_call()
            self.state = "exit" if self._wrapped else DONE
        else:
            self.state = "param_name"
        return True

    def _param_name(self, final: bool) -> bool:
        key = self.name(name_char, ">", final)
        if key is None:
            return False
        self.pos += 1
        self._key = key
        self.state = "param_newline"
        return True

    def _param_newline(self, final: bool) -> bool:
        if self.at_end():
            if final:
                raise Broken("markup ended before a parameter value")
            return False
        if self.peek() == "\n":
            self.pos += 1
        self.begin_value(self._key, _VALUE_END, after="param")
        return True

    def _exit(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((FUNCTION, self.CLOSE), final)
        if tag is None:
            return False
        self.state = "function" if tag == FUNCTION else DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "enter": expect((FUNCTION,), "function"),
        "function": _function,
        "confirm": _confirm,
        "param": _param,
        "param_name": _param_name,
        "param_newline": _param_newline,
        **ParamsBlock.STEPS,
        "exit": _exit,
    }


class Qwen3Coder(Dialect):
    name = "qwen3_coder"
    openers = (OPEN, FUNCTION)

    def block(self, marker: str) -> Block:
        return Qwen3CoderBlock(marker, self)
