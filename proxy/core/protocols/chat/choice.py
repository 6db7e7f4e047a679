"""One choice of a streamed chat completion: its tool calls, its text, its finish.

:class:`ChoiceNormalizer` turns the upstream's deltas for one choice into output pieces (one
delta each); chat/normalize.py wraps pieces into chunks. What it does, in order, per chunk:

1. Text fields go through the dialect extractor when markup extraction is on (Q32,
   chat/markup_bridge.py).
2. Each ``tool_calls`` entry is matched to a call and fed to the call's state machine
   (chat/call_matching.py, proxy/core/calls/driver.py and state.py). A call that may
   repeat an earlier one (calls/repeats.py) is held as a SUSPECT until its arguments end,
   then dropped if it does; markup is still extracted after structured calls.
3. A finish reason ends every call and is corrected (chat/finish.py).

The layers it is built of, one job each, are listed in chat/choice_base.py. A piece keeps
the upstream chunk it belongs to (``Source``): held text goes out with the envelope of the
chunk it came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from proxy.core.calls.state import HELD
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.deltas import KEPT, FieldsDelta, KeptDelta, with_head
from proxy.core.protocols.chat.finish import Finishing
from proxy.core.protocols.chat.pieces import Piece, Sink
from proxy.core.protocols.chat.tooldelta import ToolDelta
from proxy.core.repairs import Repair

_TEXT_KEYS: Final = ("content", "reasoning_content", "reasoning", "refusal")


class ChoiceNormalizer(Finishing):
    def process(
        self,
        choice: JSONObject,
        tool: tuple[list[ToolDelta], list[Repair]] | None,
        sink: Sink,
    ) -> list[Piece]:
        """The pieces this chunk sends for this choice; what it releases of older chunks goes
        to the held calls' slots."""
        assert sink.source is not None
        self._source, self._choice = sink.source, choice
        delta = choice.get("delta")
        head: JSONObject | None = None
        if isinstance(delta, dict):
            head = {k: v for k, v in delta.items() if k != "tool_calls"}
            if self._extracting:
                self._extract_text(head, sink)
            if tool is not None:
                entries, found = tool
                for repair in found:
                    self._record(repair)
                # markup after structured calls is still extracted (llama.cpp parses the
                # first call and leaves the next as text); a copy of a structured call is
                # dropped instead (calls/repeats.py)
                self._entries(entries, sink)
        finish = self._read_finish(choice.get("finish_reason"))
        if finish is not None:
            self._end_all(sink, complete=finish != "length")
            if finish == "stop" and self._calls.sent:
                finish = self._calls_finish(Repair.FINISH_STOP_WITH_CALLS)
        pieces = self._with_head(head, sink, delta)
        if finish is not None:
            self._attach_finish(finish, pieces, delta, had_calls=bool(tool and tool[0]))
            self.finished = finish
        return pieces

    def _with_head(self, head: JSONObject | None, sink: Sink, delta: object) -> list[Piece]:
        """Put the delta's other fields (role, text, unknown ones) in front of the pieces."""
        own = sink.own
        if head is None:  # no delta at all (Q29), or not an object: keep it as it is
            return own or [Piece(self._source, self._choice, KEPT)]
        if not own:
            held = [call for call in sink.holding if call.state in HELD]  # not DROPPED
            if head and not _has_text(head) and held:
                # the delta's role and such wait for the opening of the call they came with
                call = held[0]
                call.head = head
                placeholder = call.placeholder
                if placeholder is not None and not isinstance(placeholder.delta, KeptDelta):
                    call.placeholder = replace(
                        placeholder, delta=with_head(placeholder.delta, head)
                    )
                return own
            return [self._piece(head)] if head or not delta else own
        if not head:
            return own
        first = own[0]
        assert not isinstance(first.delta, KeptDelta)
        if not isinstance(first.delta, FieldsDelta) and _has_text(head):
            # rule 5: text never shares a delta with a tool-call entry; the text goes first
            self._record(Repair.CONTENT_BESIDE_TOOL_CALLS)
            return [self._piece(head), *own]
        own[0] = replace(first, delta=with_head(first.delta, head))
        return own


def _has_text(delta: JSONObject) -> bool:
    return any(isinstance(delta.get(k), str) and delta[k] for k in _TEXT_KEYS)
