"""DeepSeek: the ``<｜tool▁calls▁begin｜>`` family of markers (DeepSeek V3, R1, V3.1).

Markers use FULLWIDTH VERTICAL LINE (U+FF5C) and LOWER ONE EIGHTH BLOCK (U+2581). Two forms:

* V3 / R1 (vLLM ``examples/tool_chat_template_deepseekv3.jinja``, ``...deepseekr1.jinja``):
  the type, the separator, the name, and the arguments in a fenced JSON block::

      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
      ```json
      {"city": "Paris"}
      ```<｜tool▁call▁end｜><｜tool▁calls▁end｜>

* V3.1 (llama.cpp ``models/templates/deepseek-ai-DeepSeek-V3.1.jinja``): the name, the
  separator, the arguments (one line, cut here)::

      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"city": "Paris"}
      <｜tool▁call▁end｜><｜tool▁calls▁end｜>

What comes before the separator tells them apart: ``function`` is V3's type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.base import CallOpen
from proxy.core.markup.block import (
    DONE,
    WHITESPACE,
    Block,
    Broken,
    Dialect,
    Handler,
    expect,
    name_char,
)
from proxy.core.markup.jsonscan import JsonArgs, JsonBlock
from proxy.core.markup.scan import MarkerScanner

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
SEP = "<｜tool▁sep｜>"
CALL_END = "<｜tool▁call▁end｜>"
FENCE_OPEN = "```json"
FENCE_CLOSE = "```"
_SEP = MarkerScanner((SEP,))


class DeepSeekBlock(JsonBlock):
    def __init__(self, marker: str) -> None:
        super().__init__(marker, "section")
        self._fenced = False

    def _section(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((CALL_BEGIN, CALLS_END), final)
        if tag is None:
            return False
        self.state = "head" if tag == CALL_BEGIN else DONE
        return True

    def _head_text(self, final: bool) -> bool:
        head = self.gather(_SEP, final)
        if head is None:
            return False
        head = head.strip(WHITESPACE)
        self._fenced = head == "function"
        if self._fenced:
            self.state = "v3_name"
        else:
            self._open(head)
        return True

    def _v3_name(self, final: bool) -> bool:
        name = self.name(name_char, WHITESPACE + "`{", final)
        if name is None:
            return False
        self._open(name)
        return True

    def _open(self, name: str) -> None:
        if not name or not all(map(name_char, name)):
            raise Broken(f"{name!r} is not a function name")
        self.emit(CallOpen(name))
        self.part = JsonArgs(self)
        self.state = "fence" if self._fenced else "args"

    def _fence(self, final: bool) -> bool:
        self.skip_ws()
        if self.peek() != "{" and self.literal((FENCE_OPEN,), final) is None:
            return False
        self.state = "args"
        return True

    def _args(self, final: bool) -> bool:
        return self.read_part("fence_end" if self._fenced else "call_end", final)

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "section": _section,
        "head": _head_text,
        "v3_name": _v3_name,
        "fence": _fence,
        "args": _args,
        "fence_end": expect((FENCE_CLOSE,), "call_end"),
        "call_end": expect((CALL_END,), "section"),
    }


class DeepSeek(Dialect):
    name = "deepseek"
    openers = (CALLS_BEGIN,)

    def block(self, marker: str) -> Block:
        return DeepSeekBlock(marker)
