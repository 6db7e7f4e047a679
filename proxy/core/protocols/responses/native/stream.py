"""A server's own ``/v1/responses`` stream, repaired in place (native mode).

Rules this module keeps:

* An event that needs nothing goes out as the bytes it came in, so a canonical stream comes
  out byte for byte identical. A repaired or inserted event is written as compact JSON, new
  keys after the original ones; after an insert or a drop every later ``sequence_number`` is
  renumbered (and those events re-encoded), so the numbers stay 0, 1, 2, ...
* Items never interleave and ``output_index`` is each item's position: an item that begins
  while another is open waits, with its events, until that one is done (llama.cpp ends its
  message only after the calls that followed it; a nameless call's events may alternate with
  reasoning). An item never ended is ended at the terminal event, and a call whose
  arguments ended (their ``.done`` came, or they are whole JSON) as soon as the next item
  begins, so that the calls of a server that never ends them (quirk 3) need not wait. Each
  waiting item keeps its own events, and only the one that may go next is read again: a
  stream's cost grows with its length, whatever it holds.
* Repairs (docs/quirks.md R1-R10, "llama.cpp's own endpoints"), each counted every time it is
  made under its kind in proxy/core/repairs.py: missing ``sequence_number``/``event:`` lines/
  ``output_index``/``logprobs``/``annotations``/``content_index``; empty or rotating item
  and response ids; empty ``call_id`` (made) and ``name`` (the item waits for the name in its
  ``output_item.done``, else the request's only tool); arguments only in ``.done`` (a delta
  is inserted); a missing ``function_call_arguments.done`` or ``output_item.done``; deltas
  with no item; a ``response.completed`` whose ``output`` lacks the streamed items, or
  without ``usage``; a call cut by the token limit reported as ``completed`` (its item and the
  response become ``incomplete``); markup in ``output_text.delta`` (message_text.py); the
  same call twice in a row, counted, and under ``dedupe_calls`` held until its arguments end
  and dropped. Every function call goes through the shared call state table
  (calls.py, proxy/core/calls).
  Non-standard event names and the ``parallel`` wrapper pass through, counted. A second
  ``response.created``, and every event after the terminal one, are dropped, counted: the
  client sees one response, over at its terminal event.
* Under ``heal_arguments``/``coerce_arguments`` each upstream call is held whole with what
  comes after it until the terminal event: only ``response.completed`` lets a call go out
  with its arguments fixed; any other end sends it as the upstream's own events (calls.py).
* ``close(complete=False)``: what is held goes out as it is and nothing is made up, so the
  client sees the cut.
* Failing open, as chat does: a stream that would hold more than ``max_held_bytes`` (events
  waiting behind an item or a held call, a held call's text, text a dialect holds), keep
  more than ``max_response_body_bytes`` to repeat (arguments, text), or that brings an event
  over ``max_event_bytes`` or ends inside one, gives up rewriting there: what it held goes
  out as the upstream sent it, in the order it came, then every later byte as it comes, and
  the proxy adds nothing, not even an end (``cap-reached``, but for the cut tail).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from proxy.core.calls.state import NAMELESS
from proxy.core.jsonvalues import JSONObject, loads
from proxy.core.options import UpstreamOptions
from proxy.core.parse_failure import Recovered, recover
from proxy.core.protocols.responses.native.lifecycle import Phase, Step, after
from proxy.core.protocols.responses.native.model import ClientItem, WireEvent
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.structure import ItemFlow
from proxy.core.repairs import Repair
from proxy.core.sse import Event, RawBytes, SSEDecoder
from proxy.core.usage import UsageSeen, responses_tokens

# asked on every event: module names, not the enum's class attributes (a lookup each time)
_NEW, _CREATED, _OVER = Phase.NEW, Phase.CREATED, Phase.OVER
_TERMINAL: Final = ("response.completed", "response.incomplete", "response.failed")
_ITEM_EVENTS: Final = frozenset(
    {
        "response.content_part.added",
        "response.content_part.done",
        "response.output_text.delta",
        "response.output_text.done",
        "response.output_text.annotation.added",
        "response.refusal.delta",
        "response.refusal.done",
        "response.function_call_arguments.delta",
        "response.function_call_arguments.done",
        "response.custom_tool_call_input.delta",
        "response.custom_tool_call_input.done",
        "response.reasoning_summary_part.added",
        "response.reasoning_summary_part.done",
        "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done",
        "response.reasoning_text.delta",
        "response.reasoning_text.done",
    }
)
_OTHER_KNOWN: Final = frozenset(
    {"response.created", "response.in_progress", "response.queued", "error"}
)
#: hosted tools' events (their items pass through like any other)
_HOSTED_PREFIXES: Final = (
    "response.web_search_call.",
    "response.file_search_call.",
    "response.image_generation_call.",
    "response.code_interpreter_call",
    "response.mcp_",
    "response.audio.",
)


class NativeStream(ItemFlow):
    """One upstream Responses stream: ``feed(bytes) -> list[bytes]``, ``close(complete=...)``."""

    over = False  # the upstream's body is read to its end, whatever it holds

    def __init__(
        self,
        new_id: Callable[[], str],
        request: NativeRequest,
        *,
        options: UpstreamOptions,
    ) -> None:
        self._options = options
        self._decoder = SSEDecoder(max_event_bytes=options.max_event_bytes)
        self._raw = False  # gave up rewriting: every byte goes out as it came
        self.usage = UsageSeen(responses_tokens)  # the upstream's (issue 28 item 4)
        self._arrived = 0  # upstream events so far
        dialects = options.dialects if request.extracts else ()
        ItemFlow.__init__(
            self,
            request,
            dialects,
            new_id=new_id,
            dispatch=self.dispatch,
            dedupe=options.dedupe_calls,
            think=options.think_in_content,
        )
        self.calls.follow(request, options)  # issue 25: the arguments at each call's end
        self._response_id: str | None = None
        self._phase = Phase.NEW  # the response's (lifecycle.py)
        self._created: JSONObject = {}

    # -- bytes in, bytes out ---------------------------------------------------------------

    def feed(self, chunk: bytes) -> list[bytes]:
        for item in self._decoder.feed(chunk):
            self._take(item)
        return self._flush()

    def close(self, *, complete: bool) -> list[bytes]:
        for item in self._decoder.close():
            self._take(item)
        if self._raw:
            return self._flush()
        if self.text.thinking is not None:  # a <think> split's held text goes out, even on a cut
            self.text.close_think(self.text.thinking)
        self.calls.decide(cut=True)  # no terminal event said the response was whole
        while (held := self.calls.blocking) is not None:
            if complete or held.state is not NAMELESS:
                # a suspect cut short goes out as it came, a call held whole (heal/coerce)
                # as it would have streamed, never fixed
                self.end_held()
            else:
                self.calls.call_cut(held)
        if self._extracting is not None:
            self.text.end_extraction(self._extracting)
            # a message cut before its first text: its opening, held until text shows
            self.text.show_unshown(self._extracting)
        for ev in self.waited():
            self.emit(ev)
        return self._flush()

    def _flush(self) -> list[bytes]:
        out, self._out = self._out, []
        return out

    def _take(self, item: Event | RawBytes) -> None:
        if self._raw:
            if isinstance(item, Event) and item.data is not None:
                self.usage.passed(item.data)
            self._out.append(item.raw)
            return
        if isinstance(item, RawBytes):  # an event over the limit, or the stream cut inside one
            self._give_up(counted=item.reason == "oversize")
            self._out.append(item.raw)
            return
        if item.data is None:
            self._out.append(item.raw)
            return
        payload = loads(item.data)
        if not isinstance(payload, dict) or not isinstance(payload.get("type"), str):
            error = payload.get("error") if isinstance(payload, dict) else None
            if isinstance(error, dict) and self._phase is not _OVER:
                self._upstream_error(error)  # llama-server's bare error line
                return
            self._out.append(item.raw)  # not a Responses event: passed on as it came
            return
        ev = WireEvent(payload, item.raw, self._arrived)
        self._arrived += 1
        if payload.get("sequence_number") is None:
            self.repair(Repair.SEQUENCE_NUMBER_MISSING)  # the upstream's, not the events we add
        if item.event != payload["type"]:
            self.repair(Repair.EVENT_LINE_MISSING)
            ev.raw = None
        self.dispatch(ev)
        if self._over_limits():
            self._give_up(counted=True)

    def _over_limits(self) -> bool:
        """What the stream holds, or keeps to repeat, outgrew its limit (before its end)."""
        if self._phase is Phase.OVER:
            return False
        tally, options = self.calls.tally, self._options
        held = self.held_bytes + tally.held
        text = self._extracting
        if text is not None and text.extractor is not None:
            held += text.extractor.extractor.held
        thinking = self.text.thinking
        if thinking is not None and thinking.think is not None and thinking.think.found:
            held += thinking.think.held  # before, the events its text came in are held
        return (
            held > options.max_held_bytes
            or tally.kept + self.text.kept > options.max_response_body_bytes
        )

    def _give_up(self, *, counted: bool) -> None:
        """Rewriting stops (the module's docstring): text a dialect holds goes out as text,
        the events held as they came, in order; from here on every byte as it comes."""
        if counted:
            self.repair(Repair.CAP_REACHED)
        if self.text.thinking is not None:
            self.text.close_think(self.text.thinking)
        if self._extracting is not None:
            self.text.end_extraction(self._extracting)
        self._out += [ev.came for ev in self.held_events() if ev.came is not None]
        self._raw = True

    # -- routing events ----------------------------------------------------------------------

    def dispatch(self, ev: WireEvent) -> None:
        phase = self._phase
        if phase is _OVER:  # the terminal event went out: the response is over for the client
            self.repair(Repair.EVENT_AFTER_TERMINAL)
            return
        kind = ev.type
        if phase is _NEW and kind != "response.created":
            self.repair(Repair.CREATED_MISSING)
            self._start(WireEvent({"type": "response.created", "response": {}}, None))
        if kind == "response.created":
            if self._phase is not _NEW:  # one response a stream: a client starts over
                self.repair(Repair.CREATED_REPEATED)
            else:
                self._start(ev)
            return
        if self._phase is _CREATED:
            self._phase = after(self._phase, Step.IN_PROGRESS)
            if kind != "response.in_progress":
                self.repair(Repair.CREATED_MISSING)
                self.insert({"type": "response.in_progress", "response": self._head()})
        if kind in _TERMINAL:
            self._terminal(ev)
        elif kind == "response.output_item.added":
            self._added(ev)
        elif kind == "response.output_item.done":
            self._item_done(ev)
        elif kind in _ITEM_EVENTS:
            self._item_event(ev)
        elif self.waits_with_item(ev):
            return  # an event of another kind keeps its place after its item's opening
        else:
            if kind == "error" and self.calls.blocking is not None:
                self._before_error()
            if kind not in _OTHER_KNOWN and not kind.startswith(_HOSTED_PREFIXES):
                self.repair(Repair.NONSTANDARD_EVENT)
            elif isinstance(ev.get("response"), dict):
                self._response_event(ev)
            self.emit(ev)

    def _start(self, ev: WireEvent) -> None:
        self._phase = after(self._phase, Step.CREATED)
        response = ev.get("response")
        if not isinstance(response, dict):
            response = {}
            ev.set("response", response)
        if not isinstance(response.get("id"), str) or not response["id"]:
            response["id"] = "resp_" + self._new_id()
            ev.changed()
        self._response_id = response["id"]
        missing = {"created_at": 0, "model": self._request.model or "", "output": []}
        for key, value in missing.items():
            if key not in response:
                response[key] = value
                ev.changed()
                self.repair(Repair.RESPONSE_FIELDS_MISSING)
        self._created = {k: v for k, v in response.items() if k not in ("output", "usage")}
        self.emit(ev)

    def _head(self) -> JSONObject:
        return {**self._created, "status": "in_progress", "output": []}

    def _response_event(self, ev: WireEvent) -> None:
        """A later event's response: the id of the first, and the fields the first had."""
        response = ev.get("response")
        if not isinstance(response, dict):
            return
        if response.get("id") != self._response_id:
            self.repair(Repair.RESPONSE_ID_ROTATING)
            response["id"] = self._response_id
            ev.changed()
        for key in ("created_at", "model"):
            if key not in response and key in self._created:
                self.repair(Repair.RESPONSE_FIELDS_MISSING)
                response[key] = self._created[key]
                ev.changed()

    # -- the end -----------------------------------------------------------------------------

    def _upstream_error(self, error: JSONObject) -> None:
        """An error that is no Responses event (llama-server b11434 ends a failed generation
        with a bare ``data: {"error": {...}}``, no type, no terminal event): the client gets
        an ``error`` event and ``response.failed`` carrying its message, the items left open
        ended before them; never a successful end. A parser failure that holds the model's
        whole calls is answered with them instead (proxy/core/parse_failure.py)."""
        recovered = None
        if self._options.recover_parse_failures:
            recovered = recover(error.get("message"), self._request.chat_tools)
        self.repair(Repair.PARSE_FAILURE_RECOVERED if recovered else Repair.ERROR_RESHAPED)
        if self._phase is _NEW:
            self.repair(Repair.CREATED_MISSING)
            self._start(WireEvent({"type": "response.created", "response": {}}, None))
        if self._phase is _CREATED:
            self._phase = after(self._phase, Step.IN_PROGRESS)
            self.insert({"type": "response.in_progress", "response": self._head()})
        if recovered is not None:
            self._answer(recovered)
            return
        message = error.get("message")
        if not isinstance(message, str):
            message = str(error.get("message") or error.get("code") or "upstream error")
        kind = error.get("type")
        code = kind if isinstance(kind, str) and kind else "server_error"
        response = {
            **self._head(),
            "status": "failed",
            "error": {"code": code, "message": message},
            "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
        }
        failed = WireEvent({"type": "response.failed", "response": response}, None)
        self._terminal(failed, {"type": "error", "code": code, "message": message, "param": None})

    def _before_error(self) -> None:
        """The upstream reports an error while a call is held: what it sent before the error
        goes out before it, nothing fixed (a client may stop reading at an error)."""
        self.calls.decide(cut=True)
        while self.calls.blocking is not None:
            self.end_held()

    def _answer(self, recovered: Recovered) -> None:
        """The calls of a parser failure as the response's last items, then its end."""
        self._end_items(failed=False, cut=True)
        if recovered.text:
            self.add_whole_message(recovered.text)
        for call in recovered.calls:
            self.add_whole_call(call.name, call.arguments, call.id)
        usage = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
        response = {**self._head(), "status": "completed", "usage": usage}
        self._terminal(WireEvent({"type": "response.completed", "response": response}, None))

    def _end_items(self, *, failed: bool, cut: bool) -> None:
        """The items left open ended in order (or a held call's end), each event read once;
        ``cut``: the response did not end as ``response.completed`` (no call is fixed)."""
        if self.text.thinking is not None:
            self.text.close_think(self.text.thinking)
        self.calls.decide(cut=cut)
        if self.calls.blocking is not None:
            self.end_held()
        if self._extracting is not None:
            self.text.end_extraction(self._extracting)
        while self._open_item is not None or self._waiting or self.calls.blocking is not None:
            if self.calls.blocking is not None:
                self.end_held()
            elif self._open_item is not None:
                self.close_early(self._open_item, failed=failed)
            self.release()

    def _terminal(self, ev: WireEvent, error: JSONObject | None = None) -> None:
        """The response's end; ``error``: an error event the proxy sends right before it.
        Only ``response.completed`` says no token limit cut a call (heal/coerce, calls.py)."""
        self._end_items(failed=error is not None, cut=not _whole(ev))
        response = ev.get("response")
        if not isinstance(response, dict):
            response = {}
            ev.set("response", response)
        self._response_event(ev)
        self._fix_output(ev, response)
        self.usage.saw(response.get("usage"))  # before a missing one is made up
        if not isinstance(response.get("usage"), dict):
            self.repair(Repair.USAGE_MISSING)
            response["usage"] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
            ev.changed()
        if self.cut and ev.type == "response.completed":
            self.repair(Repair.CUT_AS_COMPLETED)
            ev.set("type", "response.incomplete")
            response["status"] = "incomplete"
            response["incomplete_details"] = {"reason": "max_output_tokens"}
        if error is not None:
            self.insert(error)
        self.emit(ev)
        self._phase = after(self._phase, Step.TERMINAL)

    def _fix_output(self, ev: WireEvent, response: JSONObject) -> None:
        """``output`` must be every item streamed, as its output_item.done showed it."""
        ours = [out.done for out in self._items if out.done is not None]
        if ev.came is None:  # the proxy's own end: nothing of the upstream's to repair
            response["output"] = ours
            return
        theirs = response.get("output")
        if isinstance(theirs, list) and self.text.split is not None:
            self._split_output(ev, theirs, *self.text.split)
        if isinstance(theirs, list) and self.calls.fixed_args:  # the calls' arguments fixed
            self._fixed_output(ev, theirs)
        if isinstance(theirs, list) and self.calls.dropped:  # the repeats dropped are no output
            kept = [item for item in theirs if not _dropped(item, self.calls.dropped)]
            if len(kept) != len(theirs):
                response["output"] = theirs = kept
                ev.changed()
        if isinstance(theirs, list) and len(theirs) == len(ours):
            same = [_comparable(a) == _comparable(b) for a, b in zip(theirs, ours, strict=True)]
            if all(same):
                return
            ours = [a if keep else b for a, b, keep in zip(theirs, ours, same, strict=True)]
        self.repair(Repair.OUTPUT_INCOMPLETE)
        response["output"] = ours
        ev.changed()

    def _split_output(
        self, ev: WireEvent, theirs: list[object], reasoning: ClientItem, message: ClientItem
    ) -> None:
        """The terminal's first message, whose <think> block became a reasoning item
        (think_in_content): the reasoning item, then the message as it was sent."""
        first = theirs[0] if theirs else None
        if not isinstance(first, dict) or first.get("type") != "message":
            return
        if reasoning.done is None or message.done is None:
            return
        theirs[0:1] = [reasoning.done, message.done]
        ev.changed()

    def _fixed_output(self, ev: WireEvent, theirs: list[object]) -> None:
        """The terminal's items of the calls the proxy fixed, with the fixed arguments."""
        fixed = self.calls.fixed_args
        for item in theirs:
            if not isinstance(item, dict) or item.get("type") != "function_call":
                continue
            text = fixed.get(str(item.get("id")))
            if text is not None and item.get("arguments") != text:
                item["arguments"] = text
                ev.changed()


def _whole(ev: WireEvent) -> bool:
    """Whether a terminal event says the response was not cut: ``response.completed``, its
    response not saying otherwise (a ``status`` other than ``completed``, incomplete details)."""
    response = ev.get("response")
    if ev.type != "response.completed" or not isinstance(response, dict):
        return ev.type == "response.completed"
    return response.get("status") in (None, "completed") and not response.get("incomplete_details")


def _dropped(item: object, dropped: set[str]) -> bool:
    return (
        isinstance(item, dict)
        and item.get("type") == "function_call"
        and (item.get("id") in dropped or item.get("call_id") in dropped)
    )


def _comparable(item: object) -> object:
    """An item without the reasoning blob a server may encrypt afresh for the final response."""
    if isinstance(item, dict) and "encrypted_content" in item:
        return {k: v for k, v in item.items() if k != "encrypted_content"}
    return item
