"""Nemotron: a JSON list of calls between ``<TOOLCALL>`` tags (NVIDIA Nemotron Nano v2).

Checked against the NVIDIA-Nemotron-Nano-9B-v2 chat template (its model card: "If you decide
to call any tool(s), use the following format: <TOOLCALL>[{"name": "tool_name1", "arguments":
"tool_args1"}, ...]</TOOLCALL>", past calls rendered with their arguments as JSON) and vLLM
``vllm/tool_parsers/nemotron_nano_v2_tool_parser.py`` (the brackets added back when the model
left them out, string arguments passed through)::

    <TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Paris"}},
               {"name": "get_time", "arguments": {}}]</TOOLCALL>

Arguments written as a JSON string holding an object are unwrapped (jsonscan), and
``"parameters"`` is taken for ``"arguments"``.
"""

from __future__ import annotations

from proxy.core.markup.block import Block, Dialect
from proxy.core.markup.jsonlist import TaggedJsonList

OPEN = "<TOOLCALL>"
CLOSE = "</TOOLCALL>"


class Nemotron(Dialect):
    name = "nemotron"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return TaggedJsonList(marker, CLOSE)
