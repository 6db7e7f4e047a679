"""One choice of a streamed chat completion: its tool calls, its text, its finish.

:class:`ChoiceNormalizer` turns the upstream's deltas for one choice into output pieces (one
delta each); chat/normalize.py wraps pieces into chunks. What it does, in order, per chunk:

1. Text fields go through the dialect extractor when markup extraction is on (Q32,
   chat/markup_bridge.py).
2. Each ``tool_calls`` entry is matched to a call and fed to the call's state machine
   (chat/call_matching.py, proxy/core/calls/driver.py and state.py). A call that may
   repeat an earlier one (calls/repeats.py) is held as a SUSPECT until its arguments end,
   then dropped if it does; markup is still extracted after structured calls.
3. A finish reason ends every call and is corrected (chat/finish.py). Its chunk waits until
   the choice's next event says whether it was the last (chat/early_finish.py): a later
   call, text or finish makes it early and takes it off.

The choice holds one component a job: its calls (``Calls``, proxy/core/calls/driver.py), the
pieces they and the text become in the latest chunk's envelope (chat/call_pieces.py, the
calls' writer), the entries matched to calls (chat/call_matching.py), the markup in its text
(chat/markup_bridge.py) and the deltas that go out as they came (``hot``, chat/fast.py).
A piece keeps the upstream chunk it belongs to (``Source``): held text goes out with the
envelope of the chunk it came from.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from proxy.core.calls.driver import Calls
from proxy.core.calls.state import HELD, CallInput, CallState
from proxy.core.jsonvalues import INVALID, JSONObject
from proxy.core.protocols.chat.call_matching import CallMatching
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.deltas import (
    KEPT,
    NO_FIELDS,
    Extras,
    FieldsDelta,
    KeptDelta,
    with_head,
)
from proxy.core.protocols.chat.early_finish import HeldFinish
from proxy.core.protocols.chat.fast import HotPaths
from proxy.core.protocols.chat.finish import attach_finish, read_finish
from proxy.core.protocols.chat.grammar_calls import grammar_call
from proxy.core.protocols.chat.markup_bridge import MarkupBridge
from proxy.core.protocols.chat.pieces import Call, Piece, Sink, Source, StreamContext
from proxy.core.protocols.chat.reasoning import other_field, renamed
from proxy.core.protocols.chat.tooldelta import ToolDelta
from proxy.core.repairs import Repair

_TEXT_KEYS: Final = ("content", "reasoning_content", "reasoning", "refusal")


class ChoiceNormalizer:
    """One choice of a stream, chunk by chunk (``process``) to its end (``end_stream``)."""

    __slots__ = (
        "_calls",
        "_cut",
        "_dropped",
        "_markup",
        "_matching",
        "_pieces",
        "_reasoning_other",
        "_record",
        "_stream",
        "finished",
        "held",
        "hot",
    )

    def __init__(self, stream: StreamContext, source: Source, choice: JSONObject) -> None:
        self._pieces = pieces = CallPieces(source, choice, stream.repairs)
        self._calls: Calls[Call, Sink, Extras] = Calls(
            stream,
            pieces,
            coalesce=stream.coalesce,
            dedupe=stream.dedupe,
            rules=stream.rules,
            one_call=stream.one_call,
            unwrap=pieces,
        )
        self._record = self._calls.record
        self._matching = CallMatching(self._calls, pieces, stream)
        self._markup = MarkupBridge(self._calls, pieces, stream)
        #: the deltas that go out as they came, judged without ``process``
        self.hot = HotPaths(self._calls, self._matching, self._markup, pieces)
        self.finished: object = None
        self._cut = False  # a call ended with arguments that are not JSON
        self._stream = stream
        self._reasoning_other = other_field(stream.reasoning_field)
        #: the finish whose chunk waits for the choice's next event (chat/early_finish.py)
        self.held: HeldFinish | None = None
        self._dropped: object = None  # the latest finish found early

    def process(
        self,
        choice: JSONObject,
        tool: tuple[list[ToolDelta], list[Repair]] | None,
        sink: Sink,
    ) -> list[Piece]:
        """The pieces this chunk sends for this choice; what it releases of older chunks goes
        to the held calls' slots."""
        assert sink.source is not None
        pieces = self._pieces
        pieces.source, pieces.choice = sink.source, choice
        delta = choice.get("delta")
        finish = read_finish(choice.get("finish_reason"), self._record)
        if self.held is not None and (finish is not None or _goes_on(delta)):
            self._settle(early=True)
        head: JSONObject | None = None
        if isinstance(delta, dict):
            head = {k: v for k, v in delta.items() if k != "tool_calls"}
            if self._reasoning_other is not None:
                head = self._reasoning(head)
            if self._markup.extracting:
                self._markup.extract_text(head, sink)
            if tool is not None:
                entries, found = tool
                for repair in found:
                    self._record(repair)
                # markup after structured calls is still extracted (llama.cpp parses the
                # first call and leaves the next as text); a copy of a structured call is
                # dropped instead (calls/repeats.py)
                self._matching.entries(entries, sink)
        if finish is not None:
            self._end_all(sink, complete=finish != "length")
            if finish == "stop" and self._calls.sent:
                finish = self._calls_finish(Repair.FINISH_STOP_WITH_CALLS)
        out = self._with_head(head, sink, delta)
        if finish is not None:
            had_calls = bool(tool and tool[0])
            attach_finish(
                finish, out, sink.source, choice, delta, had_calls=had_calls, record=self._record
            )
            self.finished = finish
            if finish == "tool_calls":  # calls may follow it (chat/early_finish.py)
                self.held = HeldFinish(out, out[-1])
                self._stream.finishes_held += 1
        return out

    def _reasoning(self, head: JSONObject) -> JSONObject:
        """The delta's reasoning under the field the upstream's ``reasoning_field`` names
        (chat/reasoning.py): ``reasoning-field-renamed``."""
        assert self._reasoning_other is not None
        changed = renamed(head, self._stream.reasoning_field, self._reasoning_other)
        if changed is None:
            return head
        self._record(Repair.REASONING_FIELD_RENAMED)
        return changed

    def _settle(self, *, early: bool) -> None:
        """Decide the held finish: ``early`` (more of the choice came) takes it off."""
        held = self.held
        assert held is not None
        self.held = None
        self._stream.finishes_held -= 1
        if early:
            self._record(Repair.FINISH_EARLY)
            self._dropped = self.finished
            self.finished = None
        held.settle(early=early)

    def _with_head(self, head: JSONObject | None, sink: Sink, delta: object) -> list[Piece]:
        """Put the delta's other fields (role, text, unknown ones) in front of the pieces."""
        own = sink.own
        pieces = self._pieces
        if head is None:  # no delta at all (Q29), or not an object: keep it as it is
            return own or [Piece(pieces.source, pieces.choice, KEPT)]
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
            return [pieces.piece(head)] if head or not delta else own
        if not head:
            return own
        first = own[0]
        assert not isinstance(first.delta, KeptDelta)
        if not isinstance(first.delta, FieldsDelta) and _has_text(head):
            # rule 5: text never shares a delta with a tool-call entry; the text goes first
            self._record(Repair.CONTENT_BESIDE_TOOL_CALLS)
            return [pieces.piece(head), *own]
        own[0] = replace(first, delta=with_head(first.delta, head))
        return own

    # -- the end of the stream ---------------------------------------------------------------

    def end_stream(self, sink: Sink, *, complete: bool, synthesize: bool) -> None:
        """Send everything held; with ``synthesize``, the finish chunk the upstream never sent
        (or sent early, before more of the choice: the latest such finish, as corrected)."""
        if self.held is not None:
            self._settle(early=False)
        self._end_all(sink, complete=complete)
        dropped = self._dropped
        if synthesize and self.finished is None and (self._calls.sent or dropped is not None):
            if not self._calls.sent or dropped not in (None, "stop", "tool_calls"):
                finish = dropped  # no call to speak for, or a finish such as length
            else:
                if dropped is None:
                    self._record(Repair.NO_FINISH_CHUNK)
                finish = self._calls_finish(None)
            pieces = self._pieces
            sink.late.append(Piece(pieces.source, pieces.choice, FieldsDelta(NO_FIELDS), finish))
            self.finished = finish

    def _calls_finish(self, repair: Repair | None) -> str:
        """The finish the proxy writes for calls the upstream did not finish as such: ``length``
        for a call cut off, so that no client runs it; else ``tool_calls`` (counted as
        ``repair``). Known once the calls have ended (``_end_all``)."""
        if self._cut:
            self._record(Repair.ARGS_TRUNCATED)
            return "length"
        if repair is not None:
            self._record(repair)
        return "tool_calls"

    def _end_all(self, sink: Sink, *, complete: bool) -> None:
        self._markup.stop(sink)
        calls = self._calls
        for call in calls.records:
            if call.state is CallState.NAMELESS:
                self._name_grammar_call(call, sink)
            calls.input(call, CallInput.END, "", sink, complete=complete)
        for _ in range(calls.repeats.count(calls.records)):
            self._record(Repair.CALL_DUPLICATED)
        for call in calls.records:
            if call.args:
                calls.ended(call)  # the one place a chat call's arguments end (issue 25)
                if complete and call.args.complete() is INVALID:
                    self._record(Repair.ARGS_NOT_JSON)  # Q18: seen, not repairable
                    self._cut = True
                calls.forget(call)

    def _name_grammar_call(self, call: Call, sink: Sink) -> None:
        """A call that ends without a name whose arguments are TGI's grammar output gets the
        name and the arguments inside them (chat/grammar_calls.py; ``grammar-call``)."""
        found = grammar_call(call.text())
        if found is None:
            return
        name, arguments = found
        calls = self._calls
        # the wrapper and the end-of-sequence token go: the upstream's text is reported, as
        # every argument text the proxy does not send as it came is
        calls.tally.dropped.append(call.text())
        calls.forget(call)
        calls.keep(call, arguments)
        call.name = name
        self._record(Repair.GRAMMAR_CALL)
        calls.input(call, calls.naming(call, ""), "", sink)


def _goes_on(delta: object) -> bool:
    """Whether a delta carries more of the choice: a call or text (a held finish was early)."""
    if not isinstance(delta, dict):
        return False
    return bool(delta.get("tool_calls")) or _has_text(delta)


def _has_text(delta: JSONObject) -> bool:
    return any(isinstance(delta.get(k), str) and delta[k] for k in _TEXT_KEYS)
