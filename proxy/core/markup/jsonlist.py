"""A JSON list of call objects between two tags of its own: Hunyuan's ``<tool_calls>``,
Nemotron's ``<TOOLCALL>``, LFM2's JSON form.

The list is read with :class:`~proxy.core.markup.jsonscan.JsonCall`, so each call opens as
soon as its name is complete and its arguments stream as the model writes them. Models drop
the brackets of a one-call list (vLLM's Nemotron parser adds them back), so the objects may
also follow the tag bare, separated by commas. A closing tag that never comes is not needed
once the calls are complete: the stream's end closes the block.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from proxy.core.markup.block import DONE, Handler
from proxy.core.markup.jsonscan import JsonBlock, json_part


class TaggedJsonList(JsonBlock):
    """``[{...}, {...}]`` (or ``{...}, {...}``) up to ``close``; then state ``after``, which a
    subclass may fill (Hunyuan's ``</answer>``)."""

    def __init__(self, marker: str, close: str, state: str = "list") -> None:
        super().__init__(marker, state)
        self.close_tag = close
        self._bracketed = False

    def _list(self, final: bool) -> bool:
        if not self.text_follows(final, f"nothing after {self.marker}"):
            return False
        self._bracketed = self.peek() == "["
        if self._bracketed:
            self.pos += 1
        self.state = "item"
        return True

    def _next(self, final: bool) -> bool:
        self.skip_ws()
        if final and self.at_end():
            self.state = DONE
            return True
        ends = ("]",) if self._bracketed else (self.close_tag,)
        sep = self.literal((",", *ends), final)
        if sep is None:
            return False
        self.state = "item" if sep == "," else "close" if sep == "]" else "after"
        return True

    def _close(self, final: bool) -> bool:
        self.skip_ws()
        if final and self.at_end():
            self.state = DONE
            return True
        if self.literal((self.close_tag,), final) is None:
            return False
        self.state = "after"
        return True

    def _after(self, final: bool) -> bool:
        self.state = DONE
        return True

    STEPS: ClassVar[Mapping[str, Handler]] = {
        "list": _list,
        "item": JsonBlock.call_object,
        "call": json_part("next"),
        "next": _next,
        "close": _close,
        "after": _after,
    }
