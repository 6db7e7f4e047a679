"""GLM: the function name, then ``<arg_key>``/``<arg_value>`` pairs, between ``<tool_call>``
tags (GLM-4.5, GLM-4.6, GLM-4.7, and Ling models trained on the same format).

The GLM-4.6 chat template (llama.cpp ``models/templates/GLM-4.6.jinja``; the same in
``glm_4_5.jinja``) asks for::

    <tool_call>{function-name}
    <arg_key>{arg-key-1}</arg_key>
    <arg_value>{arg-value-1}</arg_value>
    ...
    </tool_call>

and renders a past call's values with ``v | tojson if v is not string else v``: strings as
they are, everything else as JSON, so values are typed by the request's schema
(proxy.core.markup.params). GLM-4.7 writes the pairs without the newlines; a call without
arguments is ``<tool_call>get_current_date</tool_call>``. Example::

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Beijing</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, WHITESPACE, Block, Dialect, Handler, name_char
from proxy.core.markup.scan import MarkerScanner
from proxy.core.markup.xmlcall import ParamsBlock

OPEN = "<tool_call>"
KEY = "<arg_key>"
VALUE = "<arg_value>"
CLOSE = "</tool_call>"
_KEY_END = MarkerScanner(("</arg_key>",))
_VALUE_END = MarkerScanner(("</arg_value>",))


class GlmBlock(ParamsBlock):
    def __init__(self, marker: str, dialect: Glm) -> None:
        super().__init__(marker, "name", dialect.schemas)
        self._function = ""

    def _name(self, final: bool) -> bool:
        self.skip_ws()
        name = self.name(name_char, WHITESPACE + "<", final)
        if name is None:
            return False
        self._function = name
        self.state = "after_name"
        return True

    def _after_name(self, final: bool) -> bool:
        # The call opens only once a tag confirms that the word was a function name.
        return self._next(final, first=True)

    def _arg_key(self, final: bool) -> bool:
        key = self.gather(_KEY_END, final)
        if key is None:
            return False
        self._key = key.strip()
        self.state = "value"
        return True

    def _value(self, final: bool) -> bool:
        self.skip_ws()
        if self.literal((VALUE,), final) is None:
            return False
        self.begin_value(self._key, _VALUE_END, after="next")
        return True

    def _next(self, final: bool, first: bool = False) -> bool:
        self.skip_ws()
        tag = self.literal((KEY, CLOSE), final)
        if tag is None:
            return False
        if first:
            self.open_call(self._function)
        if tag == CLOSE:
            self.close_call()
            self.state = DONE
        else:
            self.state = "key"
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "name": _name,
        "after_name": _after_name,
        "key": _arg_key,
        "value": _value,
        "next": _next,
        **ParamsBlock.STEPS,
    }


class Glm(Dialect):
    name = "glm"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return GlmBlock(marker, self)
