"""Nemotron: a JSON list of calls between ``<TOOLCALL>`` tags (NVIDIA Nemotron Nano v2).

Checked against vLLM ``vllm/tool_parsers/nemotron_nano_v2_tool_parser.py`` (``<TOOLCALL>``
... ``</TOOLCALL>``, a list of ``{"name", "arguments"}`` objects, the brackets added back when
the model left them out, string arguments passed through)::

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
