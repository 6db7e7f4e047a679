"""Hermes: a JSON call object between ``<tool_call>`` tags (Hermes 2 Pro/3, Qwen2.5, Qwen3, QwQ
and their fine-tunes).

The Qwen2.5/Qwen3 chat templates tell the model (``tokenizer_config.json`` of the Qwen
repositories; vLLM ``examples/tool_chat_template_hermes.jinja``)::

    For each function call, return a json object with function name and arguments within
    <tool_call></tool_call> XML tags:
    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

and render a past call as ``<tool_call>\\n{"name": ..., "arguments": ...}\\n</tool_call>``, one
block per call. So a leaked parallel call looks like::

    Let me check.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
    <tool_call>
    {"name": "get_time", "arguments": {}}
    </tool_call>

Fine-tunes add members (``"id"``, as Groq's llama3-groq-tool-use does in the Ollama recording
in tests/fixtures) or write the name last; several objects in one block are taken in turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, Block, Dialect, Handler
from proxy.core.markup.jsonscan import JsonBlock, any_name, json_part

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


class HermesBlock(JsonBlock):
    def __init__(self, marker: str) -> None:
        super().__init__(marker, "call")
        self.start_call(any_name)

    def _next(self, final: bool) -> bool:
        self.skip_ws()
        if self.peek() == "{":
            return self.start_call(any_name)
        if self.literal((CLOSE,), final) is None:
            return False
        self.state = DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {"call": json_part("next"), "next": _next}


class Hermes(Dialect):
    name = "hermes"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return HermesBlock(marker)
