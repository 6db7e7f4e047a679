"""The streaming tool-call normalizer: SSE events of a chat completion in, client bytes out.

The core's chat stream (chat/sse_stream.py) feeds every item of proxy.core.sse's decoder to
:meth:`StreamNormalizer.feed`, and at the end calls :meth:`StreamNormalizer.close`. What comes
back is typed output (chat/sent.py), in order, which one of two writers consumes: chat bytes
for a chat client (``chat_bytes``), neutral events for a client of another protocol
(chat/neutral.py, through proxy/core/bridge.py). Nothing here does I/O, keeps a clock or
draws random numbers (ids come from ``new_id``).

Rules kept at this level (the per-choice work is in chat/choice.py, the client's chunks are
built in chat/render.py, and the fast paths, with the chunk shapes they keep, are
chat/fast.py's, all off with ``fast=False``):

* An event that cannot carry tool calls, a finish reason to correct, text to extract or an
  envelope to repair goes out as its original bytes, found by byte checks before any parsing.
  So does every event whose chunk comes out equal after the repairs: a stream without tool
  calls, and a stream already canonical, come out byte for byte identical.
* A chunk whose bytes repeat those of the latest chunk that went out as it came (a text or
  argument delta that needed nothing) around a new string is that chunk with another text:
  it is judged by the text alone, without parsing (chat/chunkshape.py). Likewise a chunk
  repeating one of content that sent nothing while the markup held a call (issue 24 item 4)
  is fed to the extractor without parsing, and sends nothing while nothing comes out. A read
  of several such events is judged all at once (``feed_read``, driven by
  chat/sse_stream.py), but for held markup, which is judged one event at a time.
* The envelope of every chunk with ``choices`` is repaired first (``object``, a missing
  ``delta``); the repaired chunk then stands for the upstream's, its bytes included.
* What is not understood (non-JSON data, unknown shapes, comments, RawBytes) goes out raw.
* A rewritten chunk keeps the upstream's envelope (id, object, created, model,
  system_fingerprint, unknown fields) and changes only what the repair needs. When one chunk
  becomes several, its usage goes only on the last (clients may add usages up) and its
  logprobs only on the first.
* Output keeps the upstream's order. A chunk is held only while what it needs is missing (a
  call's name, Q14; whether ``"{}"`` is a placeholder, until the call's next event; in S2,
  the rest of a call), and whatever comes after it waits behind it, so nothing overtakes.
* ``[DONE]`` and a clean end send what is held and the finish chunk the upstream never sent
  (Q25); a clean end without ``[DONE]`` gets one (Q27), unless the stream carried an error
  (an ``error`` chunk, or llama.cpp's ``error:`` line, Q30). An end that is not clean sends
  what is held and nothing else: the shell then aborts the client's connection.
* A chunk with a finish waits for the choice's next event, and so does what follows it
  (chat/early_finish.py): a later call, text or finish of the choice takes the finish off,
  the stream's end sends the chunk as it came. Meanwhile every event is parsed.
* Past ``max_held_bytes`` the stream gives up rewriting: what is held goes out and the rest
  is forwarded raw (``cap-reached``).

``feed`` and ``close`` raise nothing but :class:`proxy.core.errors.NormalizerError`, and that only
for a bug (a transition missing from proxy/core/calls/state.py).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace
from typing import Final, cast

from proxy.core.arguments.rules import call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import INVALID, JSONObject, dumps, loads, writable
from proxy.core.markup import reasoning_names
from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.parse_failure import chat_chunks, error_message, recover
from proxy.core.protocols.chat.choice import ChoiceNormalizer
from proxy.core.protocols.chat.chunks import (
    envelope_unsure,
    envelopes_sure,
    interest_pattern,
    role_first,
    uninteresting,
)
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.protocols.chat.early_finish import FinishHold
from proxy.core.protocols.chat.fast import HeldRepeat, ShapeRepeat, sole_field
from proxy.core.protocols.chat.pieces import Piece, Sink, Slot, Source, StreamContext
from proxy.core.protocols.chat.reasoning import other_field
from proxy.core.protocols.chat.sent import (
    Passed,
    ReadSent,
    Released,
    Sent,
    own_sent,
    size,
)
from proxy.core.protocols.chat.tooldelta import read_choices
from proxy.core.repairs import Repair
from proxy.core.sse import DONE, Event, RawBytes, done_in, encode_event, plain_data
from proxy.core.usage import USAGE, UsageSeen, chat_tokens

__all__ = [
    "RequestInfo",
    "StreamNormalizer",
    "normalize_completion",
]

_REASONING_KEYS: Final = ("reasoning_content", "reasoning")


class StreamNormalizer:
    """One streamed response. ``repairs`` counts what was changed, by kind (proxy.core.repairs);
    ``dropped_arguments`` lists argument text removed on purpose (a re-sent copy, Q17, or a
    ``{}`` placeholder), so no byte leaves without a trace. ``fast``: take the fast paths
    (chat/fast.py and the byte checks here); off, every event is parsed and processed, with
    the same output."""

    def __init__(
        self,
        options: UpstreamOptions,
        request: RequestInfo,
        *,
        new_id: Callable[[], str],
        fast: bool = True,
    ) -> None:
        self.options = options
        self.fast = fast
        self._new_id = new_id
        #: None: what a call that went out keeps for the checks counts toward
        #: max_held_bytes (a chat client: failing open costs it nothing, the upstream's own
        #: chat goes on); a limit: it is kept up to that apart (the bridge, which fails the
        #: response instead of failing open)
        self.kept_limit: int | None = None
        extract: tuple[str, ...] = ()
        in_reasoning = reasoning_names(options.dialects, options.extract_from_reasoning)
        if options.dialects and request.allows_extraction:
            extract = ("content", *(_REASONING_KEYS if in_reasoning else ()))
        rules = (
            call_rules(options, RequestTools.from_chat(request.tools)) if request.tools else None
        )
        self._ctx = StreamContext(
            # a call's arguments that may be fixed are held until its end, and go out whole
            coalesce=options.coalesce or (rules is not None and rules.fixes),
            extract=extract,
            dialect_names=options.dialects,
            reasoning_dialect_names=in_reasoning,
            tools=request.tools,
            fallback_name=request.fallback_name,
            ids=IdPool(new_id),
            dedupe=options.dedupe_calls,
            rules=rules,
            one_call=request.one_call and options.enforce_parallel_tool_calls,
            reasoning_field=options.reasoning_field,
            think_in_content=options.think_in_content,
        )
        self.repairs: Counter[str] = self._ctx.repairs
        self.dropped_arguments: list[str] = self._ctx.dropped
        #: the upstream's usage (proxy/core/usage.py): handed over where a chunk is parsed,
        #: else only searched for (issue 28 item 4)
        self.usage = UsageSeen(chat_tokens)
        renames = other_field(options.reasoning_field)  # its chunks are rewritten too
        interest = (*extract, renames) if renames else extract
        if options.think_in_content and "content" not in interest:
            interest = (*interest, "content")  # a leading <think> block is looked for
        self._interesting = interest_pattern(interest)
        self._choices: dict[int, ChoiceNormalizer] = {}
        self._queue: deque[Sent | Slot | FinishHold] = deque()  # output behind a held call
        self._queued = 0  # bytes in the queue, counted toward max_held_bytes
        self._raw = False  # gave up rewriting: everything goes out as it came
        self._blind = False  # the decoder stopped parsing (an oversize event)
        self._tail = False  # the stream ended inside an event
        self._done = False
        self._data_seen = False
        self._error_seen = False
        self._closed = False
        self._repeat: ShapeRepeat | None = None  # the latest chunk that took a hot path
        self._held: HeldRepeat | None = None  # the latest that sent nothing, a call held
        # openai-node's finalChatCompletion() throws without a role on a choice's first delta.
        # Given only where the proxy rewrites (the request offered tools): a stream without
        # tools goes out as it came. Until a first delta that carries anything was looked at,
        # the byte checks that send a chunk as it came are off, but for the usual first
        # chunk, one choice whose delta begins with its role (chunks.role_first): it passes
        # them and says the roles are there (issue 29: the first chunk unparsed).
        self._roles_due = bool(request.tools)
        self._roles_seen: set[int] = set()  # the choices whose first delta was looked at
        self._role_passed = False  # a first delta went out with its role, unparsed

    @property
    def gave_up(self) -> bool:
        """Rewriting stopped (the cap, an oversize event): the rest goes out as it came."""
        return self._raw

    def feed(self, item: Event | RawBytes) -> list[Sent]:
        """What to send the client for one decoded item, in order."""
        out = self._feed(item)
        if self._over_cap():
            out += self._give_up()
        return out

    def feed_read(self, data: bytes, events: int, texts: bool = True) -> ReadSent | None:
        """What to send for a read of ``events`` whole one-line data events (``data``,
        counted by :meth:`proxy.core.sse.SSEDecoder.plain_events`) when they can be judged without
        decoding the read; None when its events must be fed one by one.

        The judgement is ``feed``'s per event, made over the whole read: byte checks each true
        of the whole only if true of every event, or chunks repeating the shape of one that
        took a hot path (one event at a time for held markup, whose extractor moves on
        with each). The caller does not feed the read after this. A fast path: asked only
        with ``fast`` on (chat/sse_stream.py).

        A read that is one value comes back as that value, in no list: the read itself when
        it goes out as it came. ``texts``: a read of repeats comes back as the value that
        carries its texts (``SaidRead``: what the bridge reads); off (a chat
        client's stream, which writes bytes), as its chat bytes, so that the usual read makes
        no value at all."""
        if self._queue or self._ctx.finishes_held or done_in(data, events):
            return None
        if self._roles_due and (events != 1 or not role_first(data)):
            return None
        if self._raw:  # nothing is counted against the cap any more
            if USAGE in data:
                self.usage.passed_read(data)
            self._data_seen = True
            return data
        # the held markup is asked first: its chunks would fail the others' checks anyway
        if events == 1 and self._held is not None:
            held = self._held.take(plain_data(data))
            if held is not None:
                if not held:
                    return None  # fed ahead: parsed and processed as the event is fed
                self._data_seen = True
                return self._give_up() if self._over_cap() else []
        repeat = self._repeat
        if repeat is not None and (said := repeat.take_read(data, events, texts)):
            if repeat.usage:  # its envelope holds one: so does every repeat's (chat/fast.py)
                self.usage.passed_read(data)
            self._data_seen = True
            # text that went out as it came holds nothing; argument text is kept
            if repeat.key is not None and self._over_cap():
                return [said, *self._give_up()]
            return said
        usage = uninteresting(self._interesting, data)
        if usage is None or not envelopes_sure(data, events):
            return None
        # nothing of it is held or kept: the cap, not reached before it, is not now
        if usage:
            self.usage.passed_read(data)
        self._data_seen = True
        if self._roles_due:
            self._roles_passed()
        return data

    @property
    def held_bytes(self) -> int:
        """What waits now: held calls and text, and the output queued behind them."""
        return self._ctx.held + self._queued

    def _over_cap(self) -> bool:
        """What is held outgrew its limit (while rewriting; ``kept_limit`` says where what a
        call that went out keeps for the checks counts)."""
        if self._raw:
            return False
        ctx = self._ctx
        if self.kept_limit is None:
            return ctx.held + ctx.kept + self._queued > self.options.max_held_bytes
        return ctx.held + self._queued > self.options.max_held_bytes or ctx.kept > self.kept_limit

    def _feed(self, item: Event | RawBytes) -> list[Sent]:
        if isinstance(item, RawBytes):
            return self._raw_bytes(item)
        data = item.data
        if data is None:
            if item.fields and not self._raw:
                return self._send(self._error_field(item))
            return self._send([item])
        if data[:6] == b"[DONE]" and not data[6:].strip():
            return self._done_event(item)
        self._data_seen = True
        if self._raw:
            if USAGE in data:
                self.usage.passed(data)
            return self._send([item])
        if self._ctx.finishes_held:  # what follows decides a finish: parsed, whatever it is
            return self._chunk(item, data)
        if item.event is None:  # the chunk shapes of the hot paths are those of plain events
            if self._held is not None and not self._queue and not self._roles_due:
                held = self._held.take(data)
                if held is not None:
                    return [] if held else self._chunk(item, data, ahead=True)
            repeat = self._repeat
            if repeat is not None and (said := repeat.take_event(item, data)):
                if repeat.usage:
                    self.usage.passed(data)
                return self._send([said])
        if self.fast and (not self._roles_due or role_first(data)):
            usage = uninteresting(self._interesting, data)
            if usage is not None and not envelope_unsure(data, one=self._roles_due):
                if usage:
                    self.usage.passed(data)
                if self._roles_due:
                    self._roles_passed()
                return self._send([item])
        return self._chunk(item, data)

    def close(self, *, complete: bool) -> list[Sent]:
        """What ends the stream. ``complete``: the upstream's response ended cleanly."""
        if self._closed:
            return []
        self._closed = True
        # after a tail cut inside an event, any byte added would join that event
        out = [] if self._raw or self._tail else self._end(complete=complete)
        # after an error event the stream did not end well: a [DONE] would say it did
        ended_well = not (self._blind or self._tail or self._error_seen)
        if complete and not self._done and self._data_seen and ended_well:
            self.repairs[Repair.MISSING_DONE] += 1
            out.append(DONE)
        return out

    # -- events ------------------------------------------------------------------------------

    def _chunk(self, event: Event, data: bytes, *, ahead: bool = False) -> list[Sent]:
        """``ahead``: the markup's hot path fed the chunk's content ahead (``HeldRepeat``),
        so the other hot paths, which judge the text before it is fed, are not asked."""
        obj = loads(data)
        if type(obj) is dict and "usage" in obj:
            self.usage.saw(obj["usage"])
        if not isinstance(obj, dict) or not writable(obj, data):
            return self._send([Passed(event, obj if isinstance(obj, dict) else None)])
        if "error" in obj:
            recovered = self._recovered(obj)
            if recovered is not None:
                return recovered
            self._error_seen = True
        choices = obj.get("choices")
        if not isinstance(choices, list):
            return self._send([Passed(event, obj)])
        if self._repair_envelope(obj, choices):
            # from here on the repaired chunk stands for the upstream's
            data = dumps(obj)
            event = replace(event, raw=encode_event(data, event=event.event), data=data)
        if not choices:
            return self._send([Passed(event, obj)])
        source = Source(event, obj)
        only = choices[0] if len(choices) == 1 else None
        if isinstance(only, dict) and not ahead and self.fast and not self._ctx.finishes_held:
            index = only.get("index", 0)
            known = self._choices.get(index) if type(index) is int else None
            if known is not None and known.hot.take_plain_text(only, source):
                text = only["delta"]["content"]
                self._repeat = ShapeRepeat.of(event, data, obj, known.hot, b"content", text)
                return self._send([Passed(event, obj)])
            if known is not None and known.hot.take_canonical_fragment(only, source):
                [entry] = only["delta"]["tool_calls"]
                text, key = entry["function"]["arguments"], entry["index"]
                hot = known.hot
                self._repeat = ShapeRepeat.of(event, data, obj, hot, b"arguments", text, key)
                return self._send([Passed(event, obj)])
        reads = read_choices(choices)
        if reads is None:
            return self._send([Passed(event, obj)])
        own: list[list[Piece]] = []
        slots: list[Slot | FinishHold] = []
        held = []
        for position, (choice, tool) in enumerate(zip(choices, reads, strict=True)):
            sink = Sink(source)
            normalizer = self._choice(choice, position, source)
            own.append(normalizer.process(choice, tool, sink))
            slots += sink.new_slots()
            if normalizer.held is not None and normalizer.held.hold is None:
                held.append(normalizer.held)
        out = own_sent(source, choices, own)
        if held:  # the chunk waits for what its finishes turn out to be
            hold = FinishHold(out, len(held))
            for finish in held:
                finish.hold = hold
            return self._send([], [hold, *slots])
        if self.fast and not out and not slots and not self._queue and isinstance(only, dict):
            self._held_shape(event, data, obj, only)
        return self._send(out, slots)

    def _held_shape(self, event: Event, data: bytes, chunk: JSONObject, only: JSONObject) -> None:
        """Keep the shape of a chunk of nothing but content that sent nothing while the markup
        holds a call, for the next chunks of the call (``HeldRepeat``)."""
        text = sole_field(only, "content")
        index = only.get("index", 0)
        known = self._choices.get(index) if type(index) is int else None
        if type(text) is str and known is not None and known.hot.markup.holding:
            self._held = HeldRepeat.of(event, data, chunk, text, known.hot.markup)

    def _repair_envelope(self, chunk: JSONObject, choices: list[object]) -> bool:
        """Name the chunk a ``chat.completion.chunk`` (openai-python's stream helper drops any
        other) and give a choice without ``delta`` an empty one (Q29). Whether it changed; a
        choice that is not an object leaves the chunk as it came (it is not understood).

        A chunk without choices that names another object keeps it: Azure's
        prompt_filter_results chunk (``"object": ""``) is forwarded as docs/quirks.md K6
        asks, and the helper's filter on ``object`` exists precisely to skip it."""
        if not all(isinstance(choice, dict) for choice in choices):
            return False
        changed = False
        named = chunk.get("object")
        if named != "chat.completion.chunk" and (named is None or choices):
            chunk["object"] = "chat.completion.chunk"
            self.repairs[Repair.OBJECT_MISSING] += 1
            changed = True
        for position, choice in enumerate(cast("list[JSONObject]", choices)):
            if "delta" not in choice:
                choice["delta"] = {}
                self.repairs[Repair.DELTA_MISSING] += 1
                changed = True
            if self._roles_due and self._role_missing(choice, position):
                choice["delta"] = {"role": "assistant", **choice["delta"]}
                self.repairs[Repair.ROLE_MISSING] += 1
                changed = True
        if self._roles_seen:
            self._roles_due = False
        return changed

    def _roles_passed(self) -> None:
        """A chunk of one choice whose delta begins with its role went out unparsed: what
        ``_repair_envelope`` finds in it, the role there and the check over."""
        self._roles_due = False
        self._role_passed = True

    def _role_missing(self, choice: JSONObject, position: int) -> bool:
        """Whether the first delta of a choice that carries anything lacks ``role`` (S1 and S2
        alike). An empty delta is no first delta: the proxy itself sends one when it holds a
        chunk's call and role but must send its usage. Choices that first appear after the
        first such delta are not looked at (they pass the byte checks)."""
        index = choice.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        delta = choice.get("delta")
        if key in self._roles_seen or not isinstance(delta, dict) or not delta:
            return False
        self._roles_seen.add(key)
        return "role" not in delta

    def _send(self, out: list[Sent], slots: list[Slot | FinishHold] | None = None) -> list[Sent]:
        """Output in the upstream's order: whatever comes after a held call waits behind it."""
        if not self._queue and not slots:
            return out
        self._queue.extend(out)
        self._queued += sum(map(size, out))
        if slots:
            self._queue.extend(slots)
        sent: list[Sent] = []
        queue = self._queue
        while queue:
            head = queue[0]
            if isinstance(head, Slot):
                if not head.done:
                    break
                sent += [Released(piece) for piece in head.pieces]
            elif isinstance(head, FinishHold):
                if head.waiting:
                    break
                sent += head.sent
            else:
                sent.append(head)
                self._queued -= size(head)
            queue.popleft()
        return sent

    def _choice(self, choice: JSONObject, position: int, source: Source) -> ChoiceNormalizer:
        index = choice.get("index")
        key = index if isinstance(index, int) and not isinstance(index, bool) else position
        normalizer = self._choices.get(key)
        if normalizer is None:
            normalizer = self._choices[key] = ChoiceNormalizer(self._ctx, source, choice)
        return normalizer

    def _recovered(self, error: JSONObject) -> list[Sent] | None:
        """llama-server's parser failure that holds the model's calls: what the stream
        sends instead of the error, the calls as if the upstream had streamed them, then
        its end (proxy/core/parse_failure.py); None: the error goes on."""
        if not self.options.recover_parse_failures:
            return None
        recovered = recover(error_message(error), self._ctx.tools)
        if recovered is None:
            return None
        self.repairs[Repair.PARSE_FAILURE_RECOVERED] += 1
        out: list[Sent] = []
        # the client has its role already when a choice was parsed or a role went out
        role = not self._choices and not self._role_passed
        chunks = chat_chunks(recovered, model="", new_id=self._new_id, role=role)
        for chunk in chunks:
            data = dumps(chunk)
            out += self._chunk(Event(raw=encode_event(data), data=data), data)
        return out + self._done_event(Event(raw=DONE, data=b"[DONE]"))

    def _done_event(self, event: Event) -> list[Sent]:
        out = [] if self._raw else self._end(complete=True)
        self._done = True
        return out + self._send([event])

    def _error_field(self, event: Event) -> list[Sent]:
        """Q30: llama.cpp reports errors in an ``error:`` field, which SSE clients ignore."""
        values = [value for name, value in event.fields if name == "error"]
        if not values:
            return [event]
        text = "\n".join(values)
        payload = loads(text)
        if payload is INVALID:
            payload = {"message": text}
        recovered = self._recovered({"error": payload})
        if recovered is not None:
            return recovered
        self.repairs[Repair.ERROR_FIELD] += 1
        self._error_seen = True
        chunk = {"error": payload}
        return [Passed(replace(event, raw=encode_event(dumps(chunk), event=event.event)), chunk)]

    def _raw_bytes(self, item: RawBytes) -> list[Sent]:
        out = [] if self._raw else self._end(complete=False)
        if item.reason == "oversize":
            if not self._raw:
                self.repairs[Repair.CAP_REACHED] += 1
            self._raw = self._blind = True
        else:
            self._tail = True
        out.append(item)  # no event: the bridge reads none off it
        return out

    def _give_up(self) -> list[Sent]:
        self.repairs[Repair.CAP_REACHED] += 1
        out = self._end(complete=False)
        self._raw = True
        return out

    def _end(self, *, complete: bool) -> list[Sent]:
        """Send everything held in every choice; with ``complete``, the missing finishes."""
        late: list[Piece] = []
        synthesize = complete and not self._error_seen
        for key in sorted(self._choices):
            sink = Sink(None)
            self._choices[key].end_stream(sink, complete=complete, synthesize=synthesize)
            late += sink.late
        return self._send([Released(piece) for piece in late])
