"""The blocks of a native Messages stream: which upstream block an event belongs to, the order
they go out in, what waits behind a growing tool block, and how the client's blocks are
numbered and written (the rules are in stream.py's docstring; a block's lifecycle is
lifecycle.py's ``BLOCK``).

``BlockFlow`` is the block half of :class:`~proxy.core.protocols.messages.native.stream.
NativeMessages`, which routes each event and keeps the message's own phases; it holds the
parts that each do one job: the calls (calls.py, a tool call's state and its events) and the
markup in text blocks (text.py).

Client block indexes are dense from 0 in the order blocks go out, from one counter: the
calls' ``next_index`` (proxy/core/calls/driver.py ``Calls``, of the ``ToolCalls`` held as
``calls``), which gives a call its index as its opening is built, and which a text or thinking
block takes its index from here. At most one block is open on the client (``wire``, its type;
``_wire_index``, its index), and at most one upstream block is streamed (``active``). The tool
blocks the client was shown are the calls' ``sent`` (for the stop reason); whether one's input
did not parse is kept here. An event that needs nothing goes out as the bytes that came; a
changed or inserted one as compact JSON.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from operator import itemgetter

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.markup import build_extractor
from proxy.core.markup.fail_open import fail_open
from proxy.core.protocols.messages.native import fields as native_fields
from proxy.core.protocols.messages.native.calls import ToolCalls
from proxy.core.protocols.messages.native.lifecycle import BlockPhase, BlockStep, block_after
from proxy.core.protocols.messages.native.model import (
    Item,
    ToolCall,
    UpstreamBlock,
    input_parses,
)
from proxy.core.protocols.messages.native.text import BlockText
from proxy.core.protocols.messages.wire import encode
from proxy.core.protocols.think import LeadingThink
from proxy.core.repairs import Repair
from proxy.core.sse import Event, encode_event

_OPEN = BlockPhase.OPEN  # asked on every delta: a module name, not the class attribute
_Pending = tuple[int, Event, JSONObject]  # an event waiting: its place among the upstream's


class BlockFlow:
    """The blocks of one native Messages stream, and where their events go out (renumbered
    in place). ``starting`` is called as a block starts: the message must have begun."""

    def __init__(
        self,
        new_id: Callable[[], str],
        dialects: tuple[str, ...],
        tools: list[JSONObject],
        *,
        dedupe: bool,
        starting: Callable[[], None],
        think: bool = False,
    ) -> None:
        self._new_id = new_id
        self.dialects = dialects
        self._tools = tools
        self._starting = starting
        self.repairs: Counter[str] = Counter()
        # the calls through the table (calls.py), which write through this object
        self.calls = ToolCalls(self, new_id, self.repairs, dedupe=dedupe)
        self.out: list[bytes] = []
        self.wire: str | None = None  # the type of the block open on the client
        self._wire_index = 0  # ... and its index
        self.bad_input = False
        self.current = -1  # the place of the upstream event being read among the upstream's
        #: the upstream's bytes held back, as they came: events waiting behind a growing tool
        #: block (``pending``), a held call's start and fragments (calls.py)
        self.held_bytes = 0
        self.pending: deque[_Pending] = deque()  # events held behind a growing tool block
        self._blocks: dict[int, UpstreamBlock] = {}  # the current generation's, by upstream index
        self.active: UpstreamBlock | None = None  # the upstream block being streamed
        self.text = BlockText(self)  # markup in text blocks
        #: think_in_content: the message's first block, if text, may begin with <think>
        self._think_first = think

    def new_id(self) -> str:
        return self._new_id()

    # -- what waits behind a growing tool block

    def for_active(self, payload: JSONObject) -> bool:
        return (
            self.active is not None
            and payload.get("type") in ("content_block_delta", "content_block_stop")
            and payload.get("index") == self.active.upstream
        )

    def wait(self, event: Event, payload: JSONObject) -> None:
        self.pending.append((self.current, event, payload))
        self.held_bytes += len(event.raw)

    def drain(self, dispatch: Callable[[Event, JSONObject], bool]) -> None:
        """The events that waited, in order, as far as they may go now (``dispatch`` says
        False for the first that must still wait, which is not counted again)."""
        while self.pending:
            waiting = self.pending[0]
            if not dispatch(waiting[1], waiting[2]):
                return
            self.pending.popleft()
            self.held_bytes -= len(waiting[1].raw)

    def beside_held_call(self, event: Event, payload: JSONObject) -> bool:
        """An event of no block (a ping) while the tool block streamed is held with its start
        (heal_arguments, a suspect under dedupe_calls): it waits in its place among the
        block's events, so that the client gets them in the order they came."""
        active = self.active
        call = active.call if active is not None else None
        if call is None or not call.opening_held:
            return False
        self.calls.hold_beside(call, event, payload)
        return True

    def held_in_order(self, more: list[tuple[int, bytes]]) -> list[bytes]:
        """Every upstream event held anywhere (and ``more``, the stream's own, each with its
        place), as it came, in the order it came, held no more (the stream gives up
        rewriting); text a dialect holds goes out as text first."""
        active = self.active
        if active is not None:
            self.close_think(active)
            self.text.close_markup(active)
        held = [*more, *((at, event.raw) for at, event, _ in self.pending)]
        self.pending.clear()
        call = active.call if active is not None else None
        if call is not None:
            held += self.calls.let_go(call)
        held.sort(key=itemgetter(0))
        self.held_bytes = 0
        return [raw for _, raw in held]

    # -- the upstream's blocks

    def block_start(self, event: Event, payload: JSONObject) -> bool:
        """A ``content_block_start``; False when it must wait behind the open tool block."""
        block = payload.get("content_block")
        upstream = payload.get("index")
        if not isinstance(block, dict) or not isinstance(upstream, int):
            self.write(event, payload, False)
            return True
        active = self.active
        if active is not None:
            if active.type == "tool_use" and not active.end.complete:
                return False
            self.finish_active(Repair.BLOCKS_OVERLAP)
        self._starting()
        changed = self.note_all(native_fields.block_start(block))
        kind = str(block.get("type"))
        current = UpstreamBlock(upstream, self.calls.calls.next_index, kind)
        self._blocks[upstream] = current
        self.active = current
        if kind == "tool_use":  # a call: the driver opens it, or holds it (calls.py)
            ident, name = block.get("id"), block.get("name")
            current.call = ToolCall(
                upstream,
                ident if isinstance(ident, str) and ident else None,  # else id-missing
                name=name if isinstance(name, str) else None,
                opening=(event, payload, changed),
                opening_at=self.current,
            )
            self.calls.name_call(current.call)
            return True
        if kind == "text" and self.dialects:
            current.markup = fail_open(build_extractor(self.dialects, self._tools))
        first, self._think_first = self._think_first, False
        if first and kind == "text" and self.wire is None and self.calls.calls.next_index == 0:
            current.think, current.think_start = LeadingThink(), (event, payload, changed)
            self.held_bytes += len(event.raw)
            return True
        self.start_wire(current, event, payload, changed)
        return True

    def block_delta(self, event: Event, payload: JSONObject) -> None:
        block = self._block_of(payload)
        if block is None or block.phase is not _OPEN:
            self.note(Repair.DELTA_AFTER_STOP)
            return
        changed = self.note_all(native_fields.delta(payload))
        delta = payload["delta"] if isinstance(payload.get("delta"), dict) else {}
        thinking = block.think is not None and delta.get("type") == "text_delta"
        if thinking and self._thinks(block, delta["text"]):
            return
        if block.call is not None:
            ended = self.calls.call_delta(block, block.call, event, payload, changed, delta)
            if ended and self.pending:
                self.finish_active(None)  # the later block it held back may start now
        elif delta.get("type") == "text_delta" and block.markup is not None:
            self.text.markup_delta(block, event, payload, delta["text"])
        else:
            self.write_block_event(block, event, payload, changed)

    def block_stop(self, event: Event, payload: JSONObject) -> None:
        block = self._block_of(payload)
        if block is None:
            self.note(Repair.DELTA_AFTER_STOP)
            return
        was, block.phase = block.phase, block_after(block.phase, BlockStep.UPSTREAM_STOPS)
        if was is not _OPEN:
            return  # stopped already, when the next block started
        self.close_think(block)
        self.text.close_markup(block)
        self.active = None
        if block.call is not None:
            self.calls.end_input(block.call)
        self._check_input(block)  # after the input's end: what heal_arguments made of it
        if self.wire is None:  # stopped with a markup call, or a dropped repeat's
            return
        self.wire = None
        self.write_at(self._wire_index, event, payload, False)

    def forget_blocks(self) -> None:
        """A new generation numbers its blocks from 0 again."""
        self._blocks = {}

    def _block_of(self, payload: JSONObject) -> UpstreamBlock | None:
        index = payload.get("index")
        return self._blocks.get(index) if isinstance(index, int) else None

    def finish_active(self, repair: Repair | None) -> None:
        """Stop the upstream block being streamed (the server did not, or not yet)."""
        block = self.active
        if block is None:
            return
        if repair is not None:
            self.note(repair)
        block.phase = block_after(block.phase, BlockStep.PROXY_STOPS)
        self.close_think(block)
        self.text.close_markup(block)
        self.active = None
        if block.call is not None:
            self.calls.end_input(block.call)
        self._check_input(block)  # after the input's end: what heal_arguments made of it
        self.stop_wire()

    # -- a leading <think> block (think_in_content; issue 24 item 11)

    def close_think(self, block: UpstreamBlock) -> None:
        """The block's text ends (or the stream gives up): what the splitter holds goes out."""
        if block.think is not None:
            self._think_out(block, *block.think.close())

    def _thinks(self, block: UpstreamBlock, text: str) -> bool:
        """A text delta of the first text block, through the splitter; False when the block's
        first text says it has no <think> block: its start goes out as it came and the delta
        goes on as any (a stream without one keeps its bytes)."""
        think = block.think
        assert think is not None
        held = think.held
        reasoning, content = think.feed(text)
        if not held and think.done and not think.found:
            block.think = None
            start = self._let_go_start(block)
            assert start is not None
            self.start_wire(block, *start)
            return False
        self._think_out(block, reasoning, content)
        return True

    def _think_out(self, block: UpstreamBlock, reasoning: str, content: str) -> None:
        """What the first text block's splitter gave: reasoning as a thinking block of the
        proxy's (no signature: none was made), then the text as a text block: the upstream's
        own start when it had no <think> block, else one of the proxy's."""
        think = block.think
        assert think is not None
        if reasoning:
            if self.wire != "thinking":
                self._let_go_start(block)
                self.open_wire({"type": "thinking", "thinking": "", "signature": ""})
            delta = {"type": "thinking_delta", "thinking": reasoning}
            self.emit({"type": "content_block_delta", "index": self._wire_index, "delta": delta})
        if not think.done:
            return
        block.think = None
        start = self._let_go_start(block)
        if think.found:
            self.note(Repair.THINK_IN_CONTENT)
            block.index = self.open_wire({"type": "text", "text": ""})
        else:
            assert start is not None
            self.start_wire(block, *start)
        if content:
            payload: JSONObject = {
                "type": "content_block_delta",
                "index": block.index,
                "delta": {"type": "text_delta", "text": content},
            }
            event = Event(encode(payload), event="content_block_delta")
            if block.markup is not None:
                self.text.markup_delta(block, event, payload, content)
            else:
                self.write_block_event(block, event, payload, False)

    def _let_go_start(self, block: UpstreamBlock) -> Item | None:
        start, block.think_start = block.think_start, None
        if start is not None:
            self.held_bytes -= len(start[0].raw)
        return start

    def end_active_input(self, *, cut: bool) -> None:
        """The stream ends: the input of a tool block still streamed ends here."""
        active = self.active
        if active is not None and active.call is not None:  # a suspect's input ends here
            self.calls.end_input(active.call, cut=cut)

    def _check_input(self, block: UpstreamBlock) -> None:
        if block.call is not None and not input_parses(block.call.text()):
            self.bad_input = True

    # -- the client's blocks

    def start_tool(self, index: int) -> None:
        """A tool block goes out (its call's opening): the next client block, ``index``."""
        self.stop_wire()
        self.wire, self._wire_index = "tool_use", index

    def start_wire(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        """An upstream text or thinking block starts: the next client block."""
        calls = self.calls.calls
        self.wire, self._wire_index = block.type, calls.next_index
        block.index = calls.next_index
        calls.next_index += 1
        self.write_block_event(block, event, payload, changed)

    def stop_wire(self) -> None:
        if self.wire is not None:
            self.wire = None
            self.emit({"type": "content_block_stop", "index": self._wire_index})

    def open_wire(self, block: JSONObject) -> int:
        """A block the upstream did not start as such (text after markup): its index."""
        self.stop_wire()
        index = self.calls.calls.next_index
        self.calls.calls.next_index += 1
        self.wire, self._wire_index = str(block["type"]), index
        self.emit({"type": "content_block_start", "index": index, "content_block": block})
        return index

    def write_block_event(
        self, block: UpstreamBlock, event: Event, payload: JSONObject, changed: bool
    ) -> None:
        self.write_at(block.index, event, payload, changed)

    def write_at(self, index: int, event: Event, payload: JSONObject, changed: bool) -> None:
        """An upstream block event, renumbered to the client block it belongs to."""
        if payload.get("index") != index:
            payload["index"] = index
            changed = True
        self.write(event, payload, changed)

    # -- output

    def write(self, event: Event, payload: JSONObject, changed: bool) -> None:
        if event.event is None:
            self.note(Repair.EVENT_LINE_MISSING)
        elif not changed:
            self.out.append(event.raw)
            return
        name = event.event or str(payload.get("type"))
        self.out.append(encode_event(orjson.dumps(payload), event=name))

    def emit(self, payload: JSONObject) -> None:
        self.out.append(encode(payload))

    def note(self, repair: Repair) -> None:
        self.repairs[repair] += 1

    def note_all(self, repairs: list[Repair]) -> bool:
        for repair in repairs:
            self.repairs[repair] += 1
        return bool(repairs)

    def take(self) -> list[bytes]:
        out, self.out = self.out, []
        return out
