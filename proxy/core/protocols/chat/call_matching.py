"""Which call a ``tool_calls`` entry belongs to, and what of the entry is news to the client.

Each entry is matched to a call (the upstream index, else the id, else the call in progress;
a new id or name under a used index starts a new call, Q10), stripped of what the client must
see only once (Q1, Q2, Q4, Q5), checked for a re-sent copy of the arguments (Q17) and fed to
the call's state machine (proxy/core/calls/driver.py). :class:`CallMatching` keeps the
choice's calls by the upstream's index and id, and the call in progress.
"""

from __future__ import annotations

from typing import Final

from proxy.core.calls.driver import Calls
from proxy.core.calls.jsontext import complete_json
from proxy.core.calls.state import CallInput, CallState, compared_when_whole, may_become_whole
from proxy.core.jsonvalues import INVALID
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.deltas import Extras, added
from proxy.core.protocols.chat.pieces import Call, Sink, StreamContext
from proxy.core.protocols.chat.tooldelta import ToolDelta
from proxy.core.repairs import Repair

_AFTER_VALUE_COULD_FOLLOW: Final = frozenset(":[,")


class CallMatching:
    """The ``tool_calls`` entries of one choice, to the calls they belong to."""

    __slots__ = ("_by_id", "_calls", "_ctx", "_input", "_pieces", "_record", "by_key", "last")

    def __init__(
        self, calls: Calls[Call, Sink, Extras], pieces: CallPieces, ctx: StreamContext
    ) -> None:
        self._calls = calls
        self._pieces = pieces
        self._ctx = ctx
        self._record = calls.record
        self._input = calls.input  # bound once: asked on every entry or segment
        self.by_key: dict[int | str, Call] = {}  #: the calls by the upstream's index
        self._by_id: dict[str, Call] = {}
        self.last: Call | None = None  #: the call in progress

    def entries(self, entries: list[ToolDelta], sink: Sink) -> None:
        touched: set[Call] = set()
        for entry in entries:
            call = self._locate(entry)
            if call in touched:
                self._record(Repair.SAME_INDEX_TWICE)
            elif touched:
                self._record(Repair.SEVERAL_CALLS_IN_ONE_DELTA)
            touched.add(call)
            self._entry(call, entry, sink)

    def _locate(self, td: ToolDelta) -> Call:
        """The call an entry belongs to, made new if it starts one (Q8, Q10, Q11)."""
        for repair in td.repairs:
            self._record(repair)
        call: Call | None
        if td.key is not None:
            call = self.by_key.get(td.key)
            if call is None and td.id is None and td.name is None and td.args and self.last:
                # Q11: text under an index that never opened belongs to the call in progress
                self._record(Repair.INDEX_OFFSET)
                call = self.last
        elif td.id is not None:
            call = self._by_id.get(td.id)
        else:
            call = self.last
        if call is not None and (
            self._other_call(call, td)
            or (not self._resent(call, td) and self._same_name_again(call, td))
        ):
            if td.key is not None:
                self._record(Repair.INDEX_REUSED)
            call = None
        if call is None:
            call = self._pieces.new_call(td.key, td.id)
            self._calls.records.append(call)
        if td.key is not None:
            self.by_key[td.key] = call
        if td.id is not None and call.upstream_id is None and call.id is None:
            call.upstream_id = td.id
        if call.upstream_id is not None:
            self._by_id.setdefault(call.upstream_id, call)
        self.last = call
        return call

    @staticmethod
    def _other_call(call: Call, td: ToolDelta) -> bool:
        if td.id is not None and call.upstream_id is not None and td.id != call.upstream_id:
            return True
        return td.name is not None and call.name is not None and td.name != call.name

    @staticmethod
    def _same_name_again(call: Call, td: ToolDelta) -> bool:
        """The same name again with a new JSON value after complete arguments: a second call
        to the same function (Gemini and SGLang put parallel calls under one index)."""
        return (
            td.name is not None
            and td.name == call.name
            and td.args.lstrip()[:1] in ("{", "[")
            and bool(call.args)
            and call.args.complete() is not INVALID
        )

    def _resent(self, call: Call, td: ToolDelta) -> bool:
        """Q17: drop a final fragment that re-sends arguments already kept (or their start).

        The fragment must be one complete JSON value, and the kept text must end where no
        JSON value could follow it (not after ``:``, ``[`` or ``,``), so a legitimate nested
        value is never taken for a copy. Then if the kept text is complete and equal in
        value, or is the fragment's beginning (whitespace outside strings aside), only the
        part the client has not seen yet is kept.
        """
        kept = call.args
        if not td.args or not kept:
            return False
        value = complete_json(td.args)
        if value is INVALID:
            return False
        last = kept.last_char()
        if not last or last in _AFTER_VALUE_COULD_FOLLOW:
            return False
        end = kept.prefix_end(td.args)
        if end is None:
            if kept.complete() != value:
                return False
            end = len(td.args)
        rest = td.args[end:]
        if not rest.strip():
            end, rest = len(td.args), ""
        self._ctx.dropped.append(td.args[:end])
        self._record(Repair.ARGS_DUPLICATED_AT_END)
        td.args = rest
        return True

    def _entry(self, call: Call, td: ToolDelta, sink: Sink) -> None:
        named = call.state is not CallState.NAMELESS
        if named:
            if td.name is not None:  # equal, or _locate would have started a new call
                self._record(Repair.NAME_REPEATED)
            elif td.name_given:
                self._record(Repair.NAME_BOGUS)
            if td.has_type:
                self._record(Repair.TYPE_REPEATED)
            if td.id is not None:
                self._record(Repair.ID_REPEATED)
            if not td.args and not td.extras and not td.fn_extras:
                return
        else:
            call.has_type = call.has_type or td.type_ok
            call.had_args_key = call.had_args_key or td.has_args
        self._calls.release_others(call, sink)
        if named:
            extras = Extras.of(td.extras, td.fn_extras)
            self._input(call, CallInput.ARGS, td.args, sink, extras=extras)
        else:
            if td.extras or td.fn_extras:  # rare (thought_signature): no call for the others
                call.extras = added(call.extras, Extras(td.extras, td.fn_extras))
            if td.name is None:
                self._input(call, CallInput.ARGS, td.args, sink)
            else:
                call.name = td.name
                if call.waited:
                    self._record(Repair.NAME_AFTER_ARGS)
                self._input(call, self._calls.naming(call, td.args), td.args, sink)
        if (
            may_become_whole(call.state, call.placeholder_args)
            and td.args.rstrip()[-1:] in ("}", "]")
            and call.args.complete() is not INVALID
        ):
            call.whole = True
            if compared_when_whole(self._calls.table, call.state):
                self._input(call, CallInput.COMPLETE, "", sink)
            else:
                self._calls.send_whole_calls(sink)
