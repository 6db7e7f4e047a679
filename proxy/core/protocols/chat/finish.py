"""A choice's finish: the finish reason corrected, and the end of every call.

A finish reason ends every call (the held ones go out), is corrected (Q23, Q24) and goes
into a delta of its own when the chunk carried tool calls (Q26).

A finish the proxy writes as ``tool_calls`` itself (for ``stop``, Q23, or where the upstream
sent none, Q25) becomes ``length`` when a call was cut off: its arguments do not parse as
JSON at the end, or its markup never closed (``args-truncated``). A client must not run such a
call. The upstream's own ``tool_calls`` stays (the arguments are only counted, Q18).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from proxy.core.calls.state import CallInput
from proxy.core.jsonvalues import INVALID
from proxy.core.protocols.chat.deltas import KEPT, NO_FIELDS, FieldsDelta, KeptDelta
from proxy.core.protocols.chat.hot_paths import HotPaths
from proxy.core.protocols.chat.pieces import Piece, Sink
from proxy.core.repairs import Repair

_FINISH_MAP: Final = {"eos_token": "stop", "end_turn": "stop"}  # Q24; "" is handled apart


class Finishing(HotPaths):
    def _read_finish(self, finish: object) -> object:
        if finish == "":
            self._record(Repair.FINISH_NONSTANDARD)
            return None
        if isinstance(finish, str) and finish in _FINISH_MAP:
            self._record(Repair.FINISH_NONSTANDARD)
            return _FINISH_MAP[finish]
        return finish

    def _attach_finish(
        self, finish: object, pieces: list[Piece], delta: object, *, had_calls: bool
    ) -> None:
        last = pieces[-1] if pieces else None
        if last is not None and isinstance(last.delta, KeptDelta | FieldsDelta):
            pieces[-1] = replace(last, finish=finish)
            return
        if had_calls:
            self._record(Repair.FINISH_ON_TOOL_CALL_CHUNK)
        base = FieldsDelta(NO_FIELDS) if isinstance(delta, dict) else KEPT
        pieces.append(Piece(self._source, self._choice, base, finish))

    # -- the end of the stream ---------------------------------------------------------------

    def end_stream(self, sink: Sink, *, complete: bool, synthesize: bool) -> None:
        """Send everything held; with ``synthesize``, the finish chunk the upstream never sent."""
        self._end_all(sink, complete=complete)
        if synthesize and self._calls.sent and self.finished is None:
            self._record(Repair.NO_FINISH_CHUNK)
            finish = self._calls_finish(None)
            sink.late.append(Piece(self._source, self._choice, FieldsDelta(NO_FIELDS), finish))
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
        self._stop_extracting(sink)
        calls = self._calls
        for call in calls.records:
            self._input(call, CallInput.END, "", sink, complete=complete)
        for _ in range(calls.repeats.count(calls.records)):
            self._record(Repair.CALL_DUPLICATED)
        for call in calls.records:
            if call.args:
                if complete and call.args.complete() is INVALID:
                    self._record(Repair.ARGS_NOT_JSON)  # Q18: seen, not repairable
                    self._cut = True
                calls.forget(call)
