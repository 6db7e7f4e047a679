"""Granite: a JSON array of call objects after ``<|tool_call|>`` (IBM Granite 3.x).

Granite 3.0-3.3 write their calls as one special token followed by a JSON list (vLLM
``tool_parsers/granite_tool_parser.py`` and its tests; llama.cpp ``common/chat.cpp``
Granite handler)::

    <|tool_call|>[{"name": "get_weather", "arguments": {"city": "Boston"}},
                  {"name": "get_time", "arguments": {"zone": "EST"}}]
"""

from __future__ import annotations

from proxy.core.markup.block import Block, Dialect
from proxy.core.markup.jsonscan import JsonArrayBlock

OPEN = "<|tool_call|>"


class Granite(Dialect):
    name = "granite"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return JsonArrayBlock(marker)
