"""MiniMax-M2: ``invoke`` elements in a ``<minimax:tool_call>`` block (MiniMax-M2, M2.1, M2.5).

The MiniMax-M2.5 tool-calling guide (``docs/tool_calling_guide.md`` of MiniMax-AI/MiniMax-M2.5,
"Model Output Format"; M2 writes the same) shows the model's output::

    <minimax:tool_call>
    <invoke name="search_web">
    <parameter name="query_tag">["technology", "events"]</parameter>
    <parameter name="query_list">["\\"OpenAI\\" \\"latest\\" \\"release\\""]</parameter>
    </invoke>
    <invoke name="search_web">
    ...
    </invoke>
    </minimax:tool_call>

several calls per block. The values are text; the guide's own parser
(``parse_tool_calls``) converts each by the type the tool's schema declares, as
proxy.core.markup.params does, and drops a newline after the opening tag and one before the
closing tag, as is done here (checked against vLLM ``tests/tool_parsers/
test_minimax_m2_tool_parser.py``: calls in one delta, several invokes, two invokes closing
in one delta).

MiniMax writes the block inside its reasoning (``<think>``) too, so it is one of the dialects
``extract_from_reasoning = "auto"`` looks for in reasoning text (``in_reasoning``).
"""

from __future__ import annotations

from proxy.core.markup.block import Block, Dialect
from proxy.core.markup.invoke import InvokeBlock, Tags

OPEN = "<minimax:tool_call>"
TAGS = Tags(prefix="", block_end="</minimax:tool_call>", trim_newlines=True)


class MiniMax(Dialect):
    name = "minimax_m2"
    openers = (OPEN,)
    in_reasoning = True

    def block(self, marker: str) -> Block:
        return InvokeBlock(marker, TAGS, self.schemas)
