"""Llama 3 JSON: a bare ``{"name": ..., "parameters": {...}}`` object (Llama 3.1-3.3).

The Llama 3.1 JSON tool template (vLLM ``examples/tool_chat_template_llama3.1_json.jinja``,
from Meta's model card) asks the model to "respond in the format {"name": function name,
"parameters": dictionary of argument name and its value}" and renders a past call as
``{"name": "get_weather", "parameters": {"city": "Paris"}}``. The model may put its
``<|python_tag|>`` token first, and vLLM's llama3_json parser also takes several objects
separated by ``;`` (one line, cut here)::

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}};
    {"name": "get_time", "parameters": {}}

Without a marker, the object is looked for only at the start of the content, and only for a
function the request declared: ``{"name": "Alice", ...}`` in an answer stays text.
``"arguments"`` is accepted for ``"parameters"``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, Block, Dialect, Handler
from proxy.core.markup.jsonscan import JsonBlock, JsonCall, any_name, json_part

PYTHON_TAG = "<|python_tag|>"
BARE = "{"


class Llama3JsonBlock(JsonBlock):
    def __init__(self, marker: str, dialect: Llama3Json) -> None:
        super().__init__(marker, "call")
        # The bare form's marker is the object's own brace; the tag form is strong enough on
        # its own to take any name.
        self._accept = dialect.declared if marker == BARE else any_name
        self.part = JsonCall(self, self._accept, brace_taken=marker == BARE)

    def _next(self, final: bool) -> bool:
        sep = self.optional((";",), final)
        if sep is None:
            return False
        self.state = "another" if sep else DONE
        return True

    def _another(self, final: bool) -> bool:
        if not self.text_follows(final, "nothing after ';'"):
            return False
        return self.start_call(self._accept)

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "call": json_part("next"),
        "next": _next,
        "another": _another,
    }


class Llama3Json(Dialect):
    name = "llama3_json"
    openers = (PYTHON_TAG,)
    start_openers = (BARE,)

    def block(self, marker: str) -> Block:
        return Llama3JsonBlock(marker, self)
