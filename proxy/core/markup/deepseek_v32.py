"""DeepSeek V3.2: DSML, ``invoke`` elements in a ``<｜DSML｜function_calls>`` block.

The markers are spelled with FULLWIDTH VERTICAL LINE (U+FF5C). The reference is vLLM's
``vllm/tool_parsers/deepseekv32_tool_parser.py`` (its docstring's example, cut here)::

    <｜DSML｜function_calls>
    <｜DSML｜invoke name="get_weather">
    <｜DSML｜parameter name="location" string="true">杭州</｜DSML｜parameter>
    <｜DSML｜parameter name="date" string="true">2024-01-16</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

``string="true"`` values are text, kept as written (no newline is trimmed); ``string="false"``
values are JSON (``{"k": 1}``, ``42``, ``true``). A JSON value that does not parse, and a text
value whose schema declares another type, are typed by the schema as the untyped dialects'
are (vLLM's ``tests/tool_parsers/test_deepseekv32_tool_parser.py``: "string="true" coerced by
schema"), and stay text when nothing fits.
"""

from __future__ import annotations

from proxy.core.markup.block import Block, Dialect
from proxy.core.markup.invoke import InvokeBlock, Tags

OPEN = "<｜DSML｜function_calls>"
TAGS = Tags(
    prefix="｜DSML｜",
    block_end="</｜DSML｜function_calls>",
    trim_newlines=False,
    string_attr=True,
)


class DeepSeekV32(Dialect):
    name = "deepseek_v32"
    openers = (OPEN,)

    def block(self, marker: str) -> Block:
        return InvokeBlock(marker, TAGS, self.schemas)
