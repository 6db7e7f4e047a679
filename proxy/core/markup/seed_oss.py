"""Seed-OSS: Qwen3-Coder's function and parameter tags in a ``<seed:tool_call>`` wrapper, and
thinking in ``<seed:think>`` (ByteDance Seed-OSS-36B).

vLLM's ``tests/tool_parsers/test_seed_oss_tool_parser.py`` (real outputs of
ByteDance-Seed/Seed-OSS-36B-Instruct at three thinking budgets) shows::

    <seed:think>...The format is <seed:tool_call>
    <function=get_weather>
    <parameter=location>Barcelona, Spain</parameter>
    ...
    </seed:tool_call>. ...</seed:think><seed:tool_call>
    <function=get_weather>
    <parameter=location>Barcelona, Spain</parameter>
    <parameter=unit>celsius</parameter>
    </function>
    </seed:tool_call>

The call is the one after the thinking; the one inside it is the model rehearsing the format,
and vLLM leaves it in the text. So is it here: a ``<seed:think>`` block is given out as text
as it arrives, and no markup is looked for in it until ``</seed:think>``. The calls are parsed
as Qwen3-Coder's (values typed by the schema), and the wrapper goes with them.
"""

from __future__ import annotations

from typing import ClassVar, Final

from proxy.core.markup.base import Text
from proxy.core.markup.block import Block, Dialect, Step
from proxy.core.markup.qwen3_coder import Qwen3CoderBlock
from proxy.core.markup.scan import MarkerScanner

OPEN = "<seed:tool_call>"
CLOSE = "</seed:tool_call>"
THINK = "<seed:think>"
THINK_END = "</seed:think>"
_THINK_END: Final = MarkerScanner((THINK_END,))


class SeedOssBlock(Qwen3CoderBlock):
    CLOSE: ClassVar[str] = CLOSE


class ThinkBlock:
    """Thinking text: out as text as soon as it cannot be the start of ``</seed:think>``,
    ending after that marker."""

    def __init__(self, marker: str) -> None:
        self._buf = marker

    def feed(self, text: str) -> Step:
        self._buf += text
        end, found = _THINK_END.scan(self._buf)
        if found is not None:
            out, rest = self._buf[: found.end], self._buf[found.end :]
            self._buf = ""
            return Step([Text(out)], rest=rest)
        out, self._buf = self._buf[:end], self._buf[end:]
        return Step([Text(out)] if out else [])

    def close(self) -> Step:
        out, self._buf = self._buf, ""
        return Step([Text(out)] if out else [], rest="")

    def takes_run(self, text: str) -> bool:
        return False  # thinking text is no call's

    @property
    def held(self) -> int:
        return len(self._buf)


class SeedOss(Dialect):
    name = "seed_oss"
    openers = (OPEN, THINK)

    def block(self, marker: str) -> Block:
        if marker == THINK:
            return ThinkBlock(marker)
        return SeedOssBlock(marker, self)
