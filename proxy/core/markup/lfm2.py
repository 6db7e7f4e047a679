"""LFM2: a list of calls between ``<|tool_call_start|>`` and ``<|tool_call_end|>`` (Liquid AI
LFM2, LFM2.5), in Python call syntax by default, as JSON when the system prompt asks for it.

Checked against vLLM ``vllm/tool_parsers/lfm2_tool_parser.py`` (a Python list of calls
between the two tokens, read with ``ast``, never run) and Liquid AI's tool-use guide ("By
default, LFM2.5 generates Pythonic function calls. To get JSON format, add 'Output function
calls as JSON' to your system prompt")::

    <|tool_call_start|>[get_weather(city="Paris", days=3), get_time()]<|tool_call_end|>
    <|tool_call_start|>[{"name": "get_weather", "arguments": {"city": "Paris"}}]<|tool_call_end|>

The Python form is the pythonic dialect's parser (literals only, never evaluated) behind
tags of its own, so any function name is taken; the JSON form is read as JSON. Which one it
is shows at the first call (a name or a ``{``).
"""

from __future__ import annotations

from proxy.core.markup.block import Block, Dialect, Fork
from proxy.core.markup.jsonlist import TaggedJsonList
from proxy.core.markup.jsonscan import any_name
from proxy.core.markup.pythonic import PythonicBlock

OPEN = "<|tool_call_start|>"
CLOSE = "<|tool_call_end|>"


class Lfm2(Dialect):
    name = "lfm2"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return Fork(
            [
                (self.name, PythonicBlock(marker, any_name, end=CLOSE)),
                (self.name, TaggedJsonList(marker, CLOSE)),
            ]
        )
