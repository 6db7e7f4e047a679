"""One choice of a streamed chat completion: its tool calls, its text, its finish.

:class:`ChoiceNormalizer` turns the upstream's deltas for one choice into output pieces (one
delta each); chat/normalize.py wraps pieces into chunks. What it does, in order, per chunk:

1. Text fields (``content``, and ``reasoning_content``/``reasoning`` when asked) go through
   the dialect extractor when markup extraction is on (Q32).
2. Each ``tool_calls`` entry is matched to a call (the upstream index, else the id, else the
   call in progress; a new id or name under a used index starts a new call, Q10), stripped of
   what the client must see only once (Q1, Q2, Q4, Q5), checked for a re-sent copy of the
   arguments (Q17) and fed to the call's state machine (proxy/core/calls/state.py).
   A call that may repeat an earlier one (chat/repeats.py) is held as a SUSPECT until its
   arguments end, then dropped if it does; markup is still extracted after structured calls.
3. A finish reason ends every call (the held ones go out), is corrected (Q23, Q24) and goes
   into a delta of its own when the chunk carried tool calls (Q26).

A finish the proxy writes as ``tool_calls`` itself (for ``stop``, Q23, or where the upstream
sent none, Q25) becomes ``length`` when a call was cut off: its arguments do not parse as
JSON at the end, or its markup never closed (``args-truncated``). A client must not run such a
call. The upstream's own ``tool_calls`` stays (the arguments are only counted, Q18).

Output indexes are dense from 0 in the order the openings go out, so a call held for its
name does not block the others (Q11). A piece keeps the upstream chunk it belongs to
(``Source``): held text goes out with the envelope of the chunk it came from.
"""

from __future__ import annotations

from typing import Final

from proxy.core import markup as dialects
from proxy.core.calls.state import S1, S2, Action, CallInput, CallState, Table, transition
from proxy.core.errors import DialectError
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Extractor, Segment, Text
from proxy.core.protocols.chat.argtext import ArgText
from proxy.core.protocols.chat.chunks import INVALID, JSONObject, complete_json
from proxy.core.protocols.chat.pieces import HELD, Call, Piece, Sink, Source, StreamContext
from proxy.core.protocols.chat.repeats import Repeats, repeats
from proxy.core.protocols.chat.tooldelta import ToolDelta
from proxy.core.repairs import Repair, markup_kind

_TEXT_KEYS: Final = ("content", "reasoning_content", "reasoning", "refusal")
_FINISH_MAP: Final = {"eos_token": "stop", "end_turn": "stop"}  # Q24; "" is handled apart
_AFTER_VALUE_COULD_FOLLOW: Final = frozenset(":[,")


class ChoiceNormalizer:
    def __init__(self, stream: StreamContext, source: Source, choice: JSONObject) -> None:
        self._s = stream
        self._table: Table = S2 if stream.coalesce else S1
        self._calls: list[Call] = []
        # Found without a scan over the calls, which a choice of thousands would make on
        # every delta: the held placeholders (in S1 at most one, as a call only becomes one
        # right after the others were released), and the first call S2 has not sent whole
        # (every call before it is OPEN, which a call stays).
        self._placeholders: dict[Call, None] = {}
        self._suspects: dict[Call, None] = {}  # held until their arguments end (SUSPECT)
        self._repeats = Repeats(dedupe=stream.dedupe)
        self._unsent = 0
        self._by_key: dict[int | str, Call] = {}
        self._by_id: dict[str, Call] = {}
        self._last: Call | None = None
        self._next_index = 0
        self._sent_calls = 0
        self.finished: object = None
        self._source = source  # the latest chunk of this choice
        self._choice = choice
        self._extractors: dict[str, Extractor | None] = {}
        self._markup_call: dict[str, Call | None] = {}
        self._held_text: dict[str, str] = {}  # what an extractor holds, as far as known
        self._extracting = bool(stream.extract)
        self._cut = False  # a call ended with arguments that are not JSON, or its markup open

    # -- one chunk -------------------------------------------------------------------------

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
                # dropped instead (chat/repeats.py)
                self._entries(entries, sink)
        finish = self._read_finish(choice.get("finish_reason"))
        if finish is not None:
            self._end_all(sink, complete=finish != "length")
            if finish == "stop" and self._sent_calls:
                finish = self._calls_finish(Repair.FINISH_STOP_WITH_CALLS)
        pieces = self._with_head(head, sink, delta)
        if finish is not None:
            self._attach_finish(finish, pieces, delta, had_calls=bool(tool and tool[0]))
            self.finished = finish
        return pieces

    def take_canonical_fragment(self, choice: JSONObject, source: Source) -> bool:
        """The hot path: a canonical argument fragment of a call already open under the same
        index goes out as it came, with only the bookkeeping ``process`` would do. False when
        the chunk is anything else; ``process`` then handles it."""
        entries = _sole_field(choice, "tool_calls")
        if type(entries) is not list or len(entries) != 1:
            return False
        entry = entries[0]
        if type(entry) is not dict or len(entry) != 2:
            return False
        key, function = entry.get("index"), entry.get("function")
        if type(key) is not int or type(function) is not dict or len(function) != 1:
            return False
        text = function.get("arguments")
        if type(text) is not str or not self.fragment_passes(key, text):
            return False
        self._source, self._choice = source, choice
        return True

    def fragment_passes(self, key: int, text: str) -> bool:
        """The rest of ``take_canonical_fragment`` once the chunk's shape is known to be right:
        whether argument ``text`` under ``key`` continues an open call as it came, and if so
        its bookkeeping. Called directly for chunks that repeat the shape of one that took the
        hot path (chat/chunkshape.py), whose envelope is then the same."""
        call = self.fragment_call(key, text)
        if call is None:
            return False
        self.keep_fragment(call, text)
        return True

    def fragment_call(self, key: int, text: str) -> Call | None:
        """The open call that argument ``text`` under ``key`` continues as it came; None when
        the fragment needs ``process``. Changes nothing."""
        call = self._by_key.get(key)
        if (
            call is None
            or call.state is not CallState.OPEN
            or call.index != key
            or complete_json(text) is not INVALID  # maybe a re-sent copy (Q17)
            or self._placeholders
            or self._suspects  # another call moving on settles them (``_release_others``)
        ):
            return None
        return call

    def keep_fragment(self, call: Call, text: str) -> None:
        self._last = call
        self._keep(call, text)

    def take_plain_text(self, choice: JSONObject, source: Source) -> bool:
        """The hot path of a stream that offered tools: a delta of nothing but ``content``, in
        which no markup can start, goes out as it came. ``process`` would give the text back
        unchanged and change no state but the latest chunk; False sends it there instead."""
        text = _sole_field(choice, "content")
        if type(text) is not str or not self.text_passes(text):
            return False
        self._source, self._choice = source, choice
        return True

    def text_passes(self, text: str) -> bool:
        """The rest of ``take_plain_text`` once the chunk's shape is known to be right: whether
        content ``text`` goes out as it came (see ``fragment_passes``)."""
        if not self._extracting:
            return True
        extractor = self._extractors.get("content")
        return extractor is not None and extractor.passes(text)

    def take_markup_args(self, choice: JSONObject, source: Source) -> list[Piece] | None:
        """The hot path of a call streamed out of markup: a delta of nothing but ``content``
        that only continues the open call's arguments (``Extractor.args_run``). Its pieces,
        as ``process`` would give them with the same bookkeeping, without feeding the
        extractor; None when the chunk is anything else (``process`` then handles it).

        As for a canonical fragment, the state machine's answer is known: an open call
        sends its arguments as they come (SEND_ARGS)."""
        text = _sole_field(choice, "content")
        call = self.markup_call
        if type(text) is not str or call is None or not self.keep_markup_args(call, text):
            return None
        self._source, self._choice = source, choice
        return [self._args_piece(call, text, source, choice)]

    @property
    def markup_call(self) -> Call | None:
        """The call that markup in the content has open, if any."""
        return self._markup_call.get("content")

    def keep_markup_args(self, call: Call, text: str) -> bool:
        """The rest of ``take_markup_args`` once the chunk's shape is known to be right:
        whether content ``text`` only continues the arguments of ``call``, the open call of
        the markup, and if so the text kept with its bookkeeping (else nothing changes).
        Called directly for chunks that repeat the bytes of one that took the hot path for
        the same call, whose output is then the same around the text (chat/normalize.py)."""
        extractor = self._extractors.get("content")
        if (
            call is not self._markup_call.get("content")
            or call.state is not CallState.OPEN
            or extractor is None
            or not self._extracting
            or not extractor.args_run(text)
        ):
            return False
        self._account("content", text, [CallArgs(text)])
        self._keep(call, text)
        return True

    def _with_head(self, head: JSONObject | None, sink: Sink, delta: object) -> list[Piece]:
        """Put the delta's other fields (role, text, unknown ones) in front of the pieces."""
        own = sink.own
        if head is None:  # no delta at all (Q29), or not an object: keep it as it is
            return own or [Piece(self._source, self._choice, None)]
        if not own:
            held = [call for call in sink.holding if call.state in HELD]  # not DROPPED
            if head and not _has_text(head) and held:
                # the delta's role and such wait for the opening of the call they came with
                call = held[0]
                call.head = head
                if call.placeholder is not None and call.placeholder.delta is not None:
                    call.placeholder.delta = {**head, **call.placeholder.delta}
                return own
            return [self._piece(head)] if head or not delta else own
        first = own[0]
        assert first.delta is not None
        if not head:
            return own
        if "tool_calls" in first.delta and _has_text(head):
            # rule 5: text never shares a delta with a tool-call entry; the text goes first
            self._record(Repair.CONTENT_BESIDE_TOOL_CALLS)
            return [self._piece(head), *own]
        first.delta = {**head, **first.delta}
        return own

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
        if last is not None and (last.delta is None or "tool_calls" not in last.delta):
            last.finish = finish
            return
        if had_calls:
            self._record(Repair.FINISH_ON_TOOL_CALL_CHUNK)
        base: JSONObject | None = {} if isinstance(delta, dict) else None
        pieces.append(Piece(self._source, self._choice, base, finish))

    # -- the end of the stream ---------------------------------------------------------------

    def end_stream(self, sink: Sink, *, complete: bool, synthesize: bool) -> None:
        """Send everything held; with ``synthesize``, the finish chunk the upstream never sent."""
        self._end_all(sink, complete=complete)
        if synthesize and self._sent_calls and self.finished is None:
            self._record(Repair.NO_FINISH_CHUNK)
            finish = self._calls_finish(None)
            sink.late.append(Piece(self._source, self._choice, {}, finish))
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
        for call in self._calls:
            self._input(call, CallInput.END, "", sink, complete=complete)
        for _ in range(self._repeats.count(self._calls)):
            self._record(Repair.CALL_DUPLICATED)
        for call in self._calls:
            if call.args:
                if complete and call.args.complete() is INVALID:
                    self._record(Repair.ARGS_NOT_JSON)  # Q18: seen, not repairable
                    self._cut = True
                self._s.held -= len(call.args)
                call.args = ArgText()

    # -- tool-call entries -----------------------------------------------------------------

    def _entries(self, entries: list[ToolDelta], sink: Sink) -> None:
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
            call = self._by_key.get(td.key)
            if call is None and td.id is None and td.name is None and td.args and self._last:
                # Q11: text under an index that never opened belongs to the call in progress
                self._record(Repair.INDEX_OFFSET)
                call = self._last
        elif td.id is not None:
            call = self._by_id.get(td.id)
        else:
            call = self._last
        if call is not None and (
            self._other_call(call, td)
            or (not self._resent(call, td) and self._same_name_again(call, td))
        ):
            if td.key is not None:
                self._record(Repair.INDEX_REUSED)
            call = None
        if call is None:
            call = Call(self._source, self._choice, td.key, td.id)
            self._calls.append(call)
        if td.key is not None:
            self._by_key[td.key] = call
        if td.id is not None and call.upstream_id is None and call.id is None:
            call.upstream_id = td.id
        if call.upstream_id is not None:
            self._by_id.setdefault(call.upstream_id, call)
        self._last = call
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
        self._s.dropped.append(td.args[:end])
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
        self._release_others(call, sink)
        if named:
            self._input(call, CallInput.ARGS, td.args, sink, extras=(td.extras, td.fn_extras))
        else:
            call.extras.update(td.extras)
            call.fn_extras.update(td.fn_extras)
            if td.name is None:
                self._input(call, CallInput.ARGS, td.args, sink)
            else:
                call.name = td.name
                if call.waited:
                    self._record(Repair.NAME_AFTER_ARGS)
                self._input(call, self._naming(call, td.args), td.args, sink)
        if (
            call.state in _COLLECTED
            and not call.placeholder_args
            and td.args.rstrip()[-1:] in ("}", "]")
            and call.args.complete() is not INVALID
        ):
            call.whole = True
            if call.state is CallState.SUSPECT and self._table is S1:
                self._input(call, CallInput.COMPLETE, "", sink)
            else:
                self._send_whole_calls(sink)

    def _naming(self, call: Call, text: str) -> CallInput:
        """The input of the entry that names ``call``, with argument ``text``: a suspect if
        it may repeat an earlier call; else by the argument text known. Entries held before
        the name (vmlx sends an opening with an empty name) make even complete arguments an
        opening with ``""`` and the arguments apart: only a call in a single delta with
        nothing before it goes out whole (Groq)."""
        call.rivals = self._repeats.rivals(self._calls, call)
        if call.rivals:
            return CallInput.NAMED_SUSPECT
        event = _opening_input(call.text() + text)
        return CallInput.NAMED_PARTIAL if event is CallInput.NAMED_WHOLE and call.waited else event

    def _send_whole_calls(self, sink: Sink) -> None:
        """S2: calls go out whole as soon as they are, but never before an earlier call."""
        calls = self._calls
        while self._unsent < len(calls):
            call = calls[self._unsent]
            if call.state not in _SETTLED:
                if call.state not in _COLLECTED or not call.whole:
                    return
                self._input(call, CallInput.COMPLETE, "", sink)
            self._unsent += 1

    def _release_others(self, call: Call, sink: Sink) -> None:
        """A held placeholder goes out as it is once another call of the choice moves on."""
        for other in [held for held in self._placeholders if held is not call]:
            self._input(other, CallInput.END, "", sink)
        # a suspect's arguments end when another call moves on
        for other in [held for held in self._suspects if held is not call]:
            self._input(other, CallInput.END, "", sink)

    # -- the state machine -------------------------------------------------------------------

    def _input(
        self,
        call: Call,
        event: CallInput,
        text: str,
        sink: Sink,
        *,
        complete: bool = True,
        extras: tuple[JSONObject, JSONObject] | None = None,
    ) -> None:
        if call.state is CallState.SUSPECT and event in _ARGS_END and repeats(call):
            self._record(Repair.CALL_DUPLICATED)
            event = CallInput.DUPLICATE
        state, action = transition(self._table, call.state, event)
        if state is CallState.PLACEHOLDER:
            self._placeholders[call] = None
        elif call.state is CallState.PLACEHOLDER:
            del self._placeholders[call]
        if state is CallState.SUSPECT:
            self._suspects[call] = None
        elif call.state is CallState.SUSPECT:
            del self._suspects[call]
        call.state = state
        if state in HELD:
            if call.slot is None and call not in sink.holding:
                sink.holding.append(call)
        elif call.slot is not None:
            call.slot.done = True
        match action:  # the cases are tried in turn: streamed arguments come first
            case Action.SEND_ARGS:
                self._send_args(call, text, sink, extras)
            case Action.NOTHING:
                pass
            case Action.HOLD:
                call.waited = True
                self._keep(call, text)
            case Action.OPEN | Action.OPEN_SPLIT | Action.OPEN_WHOLE:
                self._keep(call, text)
                self._open(call, action, sink)
                if action is Action.OPEN_SPLIT and text:
                    self._record(Repair.ARGS_IN_FIRST_DELTA)
                if event is CallInput.END and complete and call.args_len == 0:  # a suspect
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.DROP:
                self._keep(call, text)
                if call.args:
                    self._s.dropped.append(call.text())
                    self._s.held -= len(call.args)
                    call.args = ArgText()
            case Action.HOLD_OPENING:
                self._keep(call, text)
                call.placeholder = self._opening(call, call.text())
            case Action.RELEASE_FOR_ARGS:
                held, call.placeholder = call.placeholder, None
                assert held is not None
                if text.lstrip().startswith("{"):
                    self._drop_placeholder(call)
                    assert held.delta is not None
                    held.delta["tool_calls"][0]["function"]["arguments"] = ""
                sink.put(held, call)
                self._send_args(call, text, sink, extras)
            case Action.RELEASE:
                held, call.placeholder = call.placeholder, None
                assert held is not None
                sink.put(held, call)
            case Action.CLOSE_ARGS:
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.FALLBACK:
                self._name_fallback(call)
                self._open(call, _OPEN_ACTION[_opening_input(call.text())], sink)
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._send_args(call, "{}", sink, None)
            case Action.COLLECT:
                self._collect(call, event, text, extras)
            case Action.SEND_WHOLE | Action.FALLBACK_WHOLE:
                if action is Action.FALLBACK_WHOLE:
                    self._name_fallback(call)
                if complete and call.args_len == 0:
                    self._record(Repair.EMPTY_ARGUMENTS)
                    self._keep(call, "{}")
                sink.put(self._opening(call, call.text()), call)

    def _keep(self, call: Call, text: str) -> None:
        if text:
            call.args.append(text)
            call.args_len += len(text)
            self._s.held += len(text)

    def _drop_placeholder(self, call: Call) -> None:
        self._record(Repair.ARGS_PLACEHOLDER)
        self._s.dropped.append(call.text())
        self._s.held -= len(call.args)
        call.args_len -= len(call.args)
        call.args = ArgText()

    def _collect(
        self,
        call: Call,
        event: CallInput,
        text: str,
        extras: tuple[JSONObject, JSONObject] | None,
    ) -> None:
        if extras is not None:
            call.extras.update(extras[0])
            call.fn_extras.update(extras[1])
        if event is CallInput.NAMED_PLACEHOLDER or (
            event is CallInput.NAMED_SUSPECT
            and _opening_input(call.text() + text) is CallInput.NAMED_PLACEHOLDER
        ):
            call.placeholder_args = True
        elif call.placeholder_args and text:
            call.placeholder_args = False
            if text.lstrip().startswith("{"):
                self._drop_placeholder(call)
        self._keep(call, text)

    def _open(self, call: Call, action: Action, sink: Sink) -> None:
        text = call.text()
        if action is Action.OPEN_WHOLE:
            sink.put(self._opening(call, text), call)
            return
        sink.put(self._opening(call, ""), call)
        if text:
            sink.put(self._args_piece(call, text, call.origin, call.origin_choice), call)

    def _send_args(
        self,
        call: Call,
        text: str,
        sink: Sink,
        extras: tuple[JSONObject, JSONObject] | None,
    ) -> None:
        self._keep(call, text)
        if text or (extras is not None and (extras[0] or extras[1])):
            piece = self._args_piece(call, text, self._source, self._choice, extras)
            sink.put(piece)

    def _name_fallback(self, call: Call) -> None:
        self._record(Repair.NAME_MISSING)
        call.name = self._s.fallback_name

    # -- building pieces -------------------------------------------------------------------

    def _opening(self, call: Call, args: str) -> Piece:
        call.index = self._next_index
        self._next_index += 1
        self._sent_calls += 1
        if call.upstream_id is not None:
            call.id = call.upstream_id
            self._s.ids.add(call.id)
        else:
            call.id = self._s.ids.fresh()
            self._record(Repair.ID_MISSING)
        if not call.from_markup:
            if not call.has_type:
                self._record(Repair.TYPE_MISSING)
            if not call.had_args_key:
                self._record(Repair.FIRST_DELTA_WITHOUT_ARGUMENTS)
            if isinstance(call.key, int) and call.key != call.index:
                self._record(Repair.INDEX_OFFSET)
        function: JSONObject = {} if call.name is None else {"name": call.name}
        function["arguments"] = args
        function.update(call.fn_extras)
        entry: JSONObject = {
            "index": call.index,
            "id": call.id,
            "type": "function",
            "function": function,
            **call.extras,
        }
        delta = {**call.head, "tool_calls": [entry]} if call.head else {"tool_calls": [entry]}
        return Piece(call.origin, call.origin_choice, delta)

    def _args_piece(
        self,
        call: Call,
        text: str,
        source: Source,
        choice: JSONObject,
        extras: tuple[JSONObject, JSONObject] | None = None,
    ) -> Piece:
        entry_extras, fn_extras = extras if extras is not None else ({}, {})
        entry: JSONObject = {
            "index": call.index,
            "function": {"arguments": text, **fn_extras},
            **entry_extras,
        }
        return Piece(source, choice, {"tool_calls": [entry]})

    def _piece(self, delta: JSONObject) -> Piece:
        return Piece(self._source, self._choice, delta)

    # -- markup in text (Q32) ----------------------------------------------------------------

    def _extract_text(self, head: JSONObject, sink: Sink) -> None:
        for key in self._s.extract:
            text = head.get(key)
            if not isinstance(text, str) or not text or not self._extracting:
                continue
            extractor = self._extractor(key)
            if extractor is None:
                continue
            del head[key]
            try:
                segments = extractor.feed(text)
            except DialectError:
                self._dialect_failed(key, text, sink)
                continue
            self._account(key, text, segments)
            self._segments(key, segments, sink)
        # the leading text goes back into the head, where it came from
        if sink.own and sink.own[0].delta is not None and "tool_calls" not in sink.own[0].delta:
            head.update(sink.own.pop(0).delta or {})

    def _extractor(self, key: str) -> Extractor | None:
        if key not in self._extractors:
            names = self._s.dialect_names if key == "content" else self._s.reasoning_dialect_names
            self._extractors[key] = dialects.build_extractor(names, self._s.tools)
            self._markup_call[key] = None
            self._held_text[key] = ""
        return self._extractors[key]

    def _account(self, key: str, text: str, segments: list[Segment]) -> None:
        """Follow the text an extractor holds: for the stream's cap, and to give it back if the
        extractor fails. Plain text answers are matched against what was fed; once markup was
        consumed the held part is unknown and counted as nothing (dialects hold little then)."""
        held = self._held_text[key] + text
        if all(isinstance(seg, Text) for seg in segments):
            returned = "".join(seg.text for seg in segments if isinstance(seg, Text))
            held = held[len(returned) :] if held.startswith(returned) else ""
        else:
            held = ""
        self._s.held += len(held) - len(self._held_text[key])
        self._held_text[key] = held

    def _segments(self, key: str, segments: list[Segment], sink: Sink) -> None:
        for seg in segments:
            call = self._markup_call.get(key)
            match seg:
                case Text(text=text):
                    if text:
                        sink.put(self._piece({key: text}))
                case CallOpen(name=name, id=ident):
                    self._s.repairs[
                        markup_kind(self._extractors.get(key), self._s.dialect_names)
                    ] += 1
                    call = Call(self._source, self._choice, None, ident, from_markup=True)
                    self._calls.append(call)
                    self._markup_call[key] = call
                    self._release_others(call, sink)
                    call.name = name
                    self._input(call, self._naming(call, ""), "", sink)
                case CallArgs(text=text):
                    if call is not None and text:
                        self._input(call, CallInput.ARGS, text, sink)
                    elif text:  # outside a call (a dialect bug): keep the text as text
                        sink.put(self._piece({key: text}))
                case CallClose(error=error):
                    if error is not None:
                        self._record(Repair.MARKUP_BROKEN)
                    if call is not None and call.state in _COLLECTED and self._table is S2:
                        call.whole = True
                        self._send_whole_calls(sink)
                    elif call is not None:
                        self._input(call, CallInput.END, "", sink)
                    self._markup_call[key] = None

    def _stop_extracting(self, sink: Sink) -> None:
        """Close the extractors: the end of the choice."""
        self._extracting = False
        for key, extractor in self._extractors.items():
            if extractor is None:
                continue
            self._extractors[key] = None
            try:
                segments = extractor.close()
            except DialectError:
                self._dialect_failed(key, "", sink)
                continue
            self._s.held -= len(self._held_text[key])
            self._held_text[key] = ""
            # a block still open when its text ends closes with an error: the call was cut off
            self._cut = self._cut or any(
                isinstance(seg, CallClose) and seg.error is not None for seg in segments
            )
            self._segments(key, segments, sink)

    def _dialect_failed(self, key: str, text: str, sink: Sink) -> None:
        """Fail open: the text the extractor held (as far as known) and the text it choked on
        go out as text, and extraction stops for the choice."""
        self._record(Repair.DIALECT_ERROR)
        self._extractors[key] = None
        lost = self._held_text[key] + text
        self._s.held -= len(self._held_text[key])
        self._held_text[key] = ""
        if lost:
            sink.put(self._piece({key: lost}))
        self._stop_extracting(sink)

    def _record(self, repair: Repair) -> None:
        self._s.repairs[repair] += 1


_SETTLED: Final = (CallState.OPEN, CallState.DROPPED)  # nothing more held
_COLLECTED: Final = (CallState.COLLECTING, CallState.SUSPECT)  # held until whole
_ARGS_END: Final = (CallInput.COMPLETE, CallInput.END)


_OPEN_ACTION: Final = {
    CallInput.NAMED_EMPTY: Action.OPEN,
    CallInput.NAMED_PARTIAL: Action.OPEN_SPLIT,
    CallInput.NAMED_WHOLE: Action.OPEN_WHOLE,
    CallInput.NAMED_PLACEHOLDER: Action.OPEN_WHOLE,
}


def _opening_input(args: str) -> CallInput:
    """How a call opens, by the argument text known when its name arrives."""
    if not args:
        return CallInput.NAMED_EMPTY
    value = complete_json(args)
    if value is INVALID:
        return CallInput.NAMED_PARTIAL
    return CallInput.NAMED_PLACEHOLDER if value == {} else CallInput.NAMED_WHOLE


def _sole_field(choice: JSONObject, key: str) -> object:
    """The delta's ``key`` when it is the delta's only field and the choice does not finish
    (the shape every hot path starts from); else None."""
    delta = choice.get("delta")
    if type(delta) is not dict or len(delta) != 1 or choice.get("finish_reason") is not None:
        return None
    return delta.get(key)


def _has_text(delta: JSONObject) -> bool:
    return any(isinstance(delta.get(k), str) and delta[k] for k in _TEXT_KEYS)
