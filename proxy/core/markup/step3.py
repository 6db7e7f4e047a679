"""Step-3: ``steptml`` elements between special tokens (StepFun Step-3).

The markers are spelled with FULLWIDTH VERTICAL LINE (U+FF5C) and ASCII underscores; they are
not DeepSeek's (``<｜tool▁calls▁begin｜>`` has U+2581). SGLang's
``python/sglang/srt/function_call/step3_detector.py`` documents the format (one line per call
here)::

    <｜tool_calls_begin｜>
    <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">
    <steptml:parameter name="city">Shanghai</steptml:parameter>
    <steptml:parameter name="count">5</steptml:parameter>
    </steptml:invoke><｜tool_call_end｜>
    <｜tool_calls_end｜>

Checked against vLLM ``tests/tool_parsers/test_step3_tool_parser.py``, which also has calls
without ``function<｜tool_sep｜>``, the function's name repeated after the separator
(``function<｜tool_sep｜>edit_file\\n<steptml:invoke name="edit_file">``) and
``<｜tool_sep｜>`` between two calls; all are taken. Values are text typed by the schema;
a string keeps its whitespace (the value sits inline, so whitespace around it is data).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, WHITESPACE, Block, Dialect, Handler, expect, name_char
from proxy.core.markup.invoke import InvokeBlock, Tags

CALLS_BEGIN = "<｜tool_calls_begin｜>"
CALLS_END = "<｜tool_calls_end｜>"
CALL_BEGIN = "<｜tool_call_begin｜>"
CALL_END = "<｜tool_call_end｜>"
SEP = "<｜tool_sep｜>"
TYPE = "function"
TAGS = Tags(prefix="steptml:", block_end=CALLS_END, trim_newlines=False)


class Step3Block(InvokeBlock):
    def __init__(self, marker: str, dialect: Step3) -> None:
        super().__init__(marker, TAGS, dialect.schemas, state="section", after_call="call_end")

    def _section(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((CALL_BEGIN, SEP, CALLS_END), final)
        if tag is None:
            return False
        self.state = {CALL_BEGIN: "head", SEP: "section", CALLS_END: DONE}[tag]
        return True

    def _head(self, final: bool) -> bool:
        self.skip_ws()
        tag = self.literal((TAGS.invoke, TYPE), final)
        if tag is None:
            return False
        self.state = "invoke" if tag == TAGS.invoke else "type_sep"
        return True

    def _after_sep(self, final: bool) -> bool:
        self.skip_ws()
        if self.at_end():
            return False
        if self.peek() == "<":
            self.state = "enter_invoke"
            return True
        if self.name(name_char, WHITESPACE + "<", final) is None:
            return False
        self.state = "enter_invoke"
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        **InvokeBlock.STEPS,
        "section": _section,
        "head": _head,
        "type_sep": expect((SEP,), "after_sep"),
        "after_sep": _after_sep,
        "enter_invoke": expect((TAGS.invoke,), "invoke"),
        "call_end": expect((CALL_END,), "section"),
    }


class Step3(Dialect):
    name = "step3"
    openers = (CALLS_BEGIN,)

    def block(self, marker: str) -> Block:
        return Step3Block(marker, self)
