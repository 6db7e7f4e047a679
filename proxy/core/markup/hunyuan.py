"""Hunyuan: a JSON list of calls between ``<tool_calls>`` tags, often inside ``<answer>``
(Tencent Hunyuan-A13B).

Checked against vLLM ``vllm/tool_parsers/hunyuan_a13b_tool_parser.py`` and its tests
(``tests/tool_parsers/test_hunyuan_a13b_tool_parser.py``), whose streamed outputs end with
``\\n</answer>``::

    <answer>
    <tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}},
                 {"name": "get_time", "arguments": {}}]</tool_calls>
    </answer>

The model's answer channel wraps the block: an ``<answer>`` tag just before it (whitespace
aside) and an ``</answer>`` tag just after it go with the block, since a client must not
see one half of a wrapper whose content became tool calls (vllm#58127 shows the
``</answer>`` leaking when the server's reasoning parser took the ``<answer>``). Anywhere
else the tags stay content: ``<answer>`` followed by prose fails open as text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, Block, Dialect, Handler, expect
from proxy.core.markup.jsonlist import TaggedJsonList

OPEN = "<tool_calls>"
CLOSE = "</tool_calls>"
ANSWER = "<answer>"
ANSWER_END = "</answer>"


class HunyuanBlock(TaggedJsonList):
    def __init__(self, marker: str) -> None:
        super().__init__(marker, CLOSE, state="answer" if marker == ANSWER else "list")

    def _after(self, final: bool) -> bool:
        if self.optional((ANSWER_END,), final) is None:
            return False
        self.state = DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        **TaggedJsonList.STEPS,
        "answer": expect((OPEN,), "list"),
        "after": _after,
    }


class Hunyuan(Dialect):
    name = "hunyuan"
    openers = (OPEN, ANSWER)

    def block(self, marker: str) -> Block:
        return HunyuanBlock(marker)
