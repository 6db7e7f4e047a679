"""Mistral: ``[TOOL_CALLS]`` and then a JSON array (older) or ``NAME[ARGS]{...}`` (newer).

* Mistral 7B v0.3 / Mixtral / Mistral Nemo / Small 3.x templates (vLLM
  ``examples/tool_chat_template_mistral.jinja``, llama.cpp
  ``models/templates/mistralai-Mistral-Small-3.1-24B-Instruct-2503.jinja``) render the calls
  as one JSON list::

      [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}]

* Magistral, Devstral 2, Ministral 3 and later (their ``chat_template.jinja``:
  ``'[TOOL_CALLS]' + tool['function']['name'] + '[ARGS]' + arguments``) write one marker per
  call, as tokenised in Rapid-MLX#579 (``[TOOL_CALLS]`` / ``read`` / ``[ARGS]`` /
  ``{"file_path"``)::

      [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}[TOOL_CALLS]get_time[ARGS]{}

  The v11 tokenizer's ``NAME[CALL_ID]ID[ARGS]{...}`` keeps its id (the call's id then), and
  ``NAME{...}`` without ``[ARGS]`` is taken too.

The ``"id"`` member in the older list form is not kept: it comes after the arguments, when
the call is long open.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.base import CallOpen
from proxy.core.markup.block import DONE, Block, Dialect, Handler
from proxy.core.markup.jsonscan import JsonArgs, JsonArrayBlock, json_part
from proxy.core.markup.scan import MarkerScanner

OPEN = "[TOOL_CALLS]"
ARGS = "[ARGS]"
CALL_ID = "[CALL_ID]"
_ID_END = MarkerScanner((ARGS,))


def _name_char(char: str) -> bool:
    return char.isalnum() or char in "_-."


class MistralBlock(JsonArrayBlock):
    def __init__(self, marker: str) -> None:
        super().__init__(marker, state="start")
        self._function = ""

    def _start(self, final: bool) -> bool:
        if not self.text_follows(final, "nothing after [TOOL_CALLS]"):
            return False
        self.state = "array" if self.peek() == "[" else "name"
        return True

    def _name(self, final: bool) -> bool:
        name = self.name(_name_char, "[{", final)
        if name is None:
            return False
        self._function = name
        self.state = "after_name"
        return True

    def _after_name(self, final: bool) -> bool:
        if self.peek() == "{":
            tag: str | None = ARGS
        else:
            tag = self.literal((ARGS, CALL_ID), final)
        if tag is None:
            return False
        if tag == CALL_ID:
            self.state = "call_id"
            return True
        return self._open(None)

    def _call_id(self, final: bool) -> bool:
        call_id = self.gather(_ID_END, final)
        if call_id is None:
            return False
        return self._open(call_id.strip() or None)

    def _open(self, call_id: str | None) -> bool:
        self.emit(CallOpen(self._function, id=call_id))
        self.part = JsonArgs(self)
        self.state = "args"
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        **JsonArrayBlock.STEPS,
        "start": _start,
        "name": _name,
        "after_name": _after_name,
        "call_id": _call_id,
        "args": json_part(DONE),
    }


class Mistral(Dialect):
    name = "mistral"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return MistralBlock(marker)
