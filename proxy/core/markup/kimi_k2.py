"""Kimi K2: special-token sections with the call id ``functions.NAME:IDX`` (Kimi K2, K2-Thinking).

The Kimi-K2-Thinking chat template (llama.cpp ``models/templates/Kimi-K2-Thinking.jinja``,
``render_toolcalls``) writes (one line, cut here)::

    <|tool_calls_section_begin|>
    <|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"city": "Paris"}
    <|tool_call_end|>
    <|tool_call_begin|>functions.get_time:1<|tool_call_argument_begin|>{}<|tool_call_end|>
    <|tool_calls_section_end|>

The id ``functions.NAME:IDX`` is the call's id (``CallOpen.id``): Kimi matches tool results
to calls by it, and breaks when a server rewrites it (vllm#46344, llxprt-code#713). A call
without the section markers (``<|tool_call_begin|>`` alone) is taken too.

Kimi K2 writes its calls inside its reasoning too (vllm#31896: without ``<think>`` tags the
whole output, markers included, lands in the reasoning), so ``extract_from_reasoning =
"auto"`` looks for this dialect there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.base import CallOpen
from proxy.core.markup.block import DONE, Block, Broken, Dialect, Handler, name_char
from proxy.core.markup.jsonscan import JsonArgs, JsonBlock, json_part
from proxy.core.markup.scan import MarkerScanner

SECTION_BEGIN = "<|tool_calls_section_begin|>"
SECTION_END = "<|tool_calls_section_end|>"
CALL_BEGIN = "<|tool_call_begin|>"
ARGUMENT_BEGIN = "<|tool_call_argument_begin|>"
CALL_END = "<|tool_call_end|>"
_ID_END = MarkerScanner((ARGUMENT_BEGIN,))


def function_name(call_id: str) -> str:
    """``functions.get_weather:0`` -> ``get_weather``."""
    name = call_id.rsplit(":", 1)[0] if ":" in call_id else call_id
    name = name.removeprefix("functions.")
    if not name or not all(map(name_char, name)):
        raise Broken(f"{call_id!r} is not a Kimi call id")
    return name


class KimiBlock(JsonBlock):
    def __init__(self, marker: str) -> None:
        self._section = marker == SECTION_BEGIN
        super().__init__(marker, "section" if self._section else "call_id")

    def _section_next(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((CALL_BEGIN, SECTION_END), final)
        if tag is None:
            return False
        self.state = "call_id" if tag == CALL_BEGIN else DONE
        return True

    def _call_id(self, final: bool) -> bool:
        call_id = self.gather(_ID_END, final)
        if call_id is None:
            return False
        call_id = call_id.strip()
        self.emit(CallOpen(function_name(call_id), id=call_id))
        self.part = JsonArgs(self)
        self.state = "args"
        return True

    def _call_end(self, final: bool) -> bool:
        self.skip_ws()
        if self.literal((CALL_END,), final) is None:
            return False
        self.state = "section" if self._section else DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "section": _section_next,
        "call_id": _call_id,
        "args": json_part("call_end"),
        "call_end": _call_end,
    }


class KimiK2(Dialect):
    name = "kimi_k2"
    openers = (SECTION_BEGIN, CALL_BEGIN)
    in_reasoning = True

    def block(self, marker: str) -> Block:
        return KimiBlock(marker)
