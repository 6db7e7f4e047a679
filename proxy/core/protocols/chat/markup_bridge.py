"""Tool calls written as markup in a choice's text (Q32), turned into calls.

The text fields (``content``, and ``reasoning_content``/``reasoning`` when asked) go
through the dialect extractor (proxy/core/markup/); its segments become text pieces and the
inputs of a call (open, arguments, close). The text an extractor holds is followed, for the
stream's cap and to give it back should the extractor fail (fail open: the text goes out as
text and extraction stops for the choice). :class:`MarkupBridge` holds a choice's
extractors, one a text field, and the call each has open.
"""

from __future__ import annotations

import re
from typing import Final

from proxy.core import markup as dialects
from proxy.core.calls.driver import Calls
from proxy.core.calls.state import CallInput, closes_whole
from proxy.core.errors import DialectError
from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Extractor, Segment, Text
from proxy.core.markup.block import WHITESPACE
from proxy.core.markup.fail_open import HeldText
from proxy.core.protocols.chat.call_pieces import CallPieces
from proxy.core.protocols.chat.deltas import Extras, FieldsDelta
from proxy.core.protocols.chat.pieces import Call, Sink, StreamContext
from proxy.core.protocols.chat.reasoning import FIELDS, LeadingThink
from proxy.core.repairs import Repair, markup_kind

_NAME_TAIL: Final = re.compile(r"[\w.:-]+\Z")


def names_call(fragment: str, name: str) -> bool:
    """Whether unfinished markup ``fragment`` names ``name``: it holds the name whole, or
    ends in the beginning of it."""
    tail = _NAME_TAIL.search(fragment.rstrip())
    if tail is not None and name.startswith(tail.group()):
        return True
    return re.search(rf"(?<![\w.:-]){re.escape(name)}(?![\w.:-])", fragment) is not None


class MarkupBridge:
    """Markup in the text fields of one choice, to calls."""

    __slots__ = (
        "_begun",
        "_broken",
        "_calls",
        "_ctx",
        "_fed",
        "_held_since",
        "_held_text",
        "_input",
        "_pieces",
        "_record",
        "_think",
        "extracting",
        "extractors",
        "open_calls",
    )

    def __init__(
        self, calls: Calls[Call, Sink, Extras], pieces: CallPieces, ctx: StreamContext
    ) -> None:
        self._calls = calls
        self._pieces = pieces
        self._ctx = ctx
        self._record = calls.record
        self._input = calls.input  # bound once: asked on every entry or segment
        self.extractors: dict[str, Extractor | None] = {}  #: by text field; None: stopped
        self.open_calls: dict[str, Call | None] = {}  #: by text field: the call its markup has open
        self._held_text: dict[str, HeldText] = {}  # what an extractor holds, as far as known
        self._broken = 0  # calls whose markup broke, as the extractors counted them so far
        self._held_since = 0  # the calls there were when the content's held text began
        self._think = LeadingThink() if ctx.think_in_content else None
        self.extracting = bool(ctx.extract) or self._think is not None
        #: content fed ahead by the hot path (``feed_held``) and what came of it, which
        #: the chunk's ``extract_text`` takes instead of feeding the text again
        self._fed: tuple[str, list[Segment] | DialectError] | None = None
        #: the text fields whose start went out as plain text before any extractor was built
        self._begun: set[str] = set()

    @property
    def markup_call(self) -> Call | None:
        """The call that markup in the content has open, if any."""
        return self.open_calls.get("content")

    @property
    def holding(self) -> bool:
        """The content's extractor is inside a call's markup, which it holds until complete."""
        extractor = self.extractors.get("content")
        return extractor is not None and self.extracting and extractor.holding

    @property
    def fed_ahead(self) -> bool:
        """The hot path fed the content of the chunk now being parsed (``feed_held``)."""
        return self._fed is not None

    def feed_held(self, text: str) -> bool | None:
        """The hot path of a call held in the content's markup (issue 24 item 4): content
        ``text`` of a chunk that carries nothing else, fed to the extractor while it holds a
        call. True: nothing came out, and the text is accounted as ``extract_text`` would
        (the chunk sends nothing). False: something came out; it is kept for the chunk's
        ``extract_text``, and the chunk must be parsed and processed next. None: the text
        was not fed (no call held, or the leading <think> still looked for)."""
        extractor = self.extractors.get("content")
        if (
            extractor is None
            or not text
            or not self.extracting
            or self._think is not None
            or not extractor.holding
        ):
            return None
        broken = extractor.broken
        try:
            segments = extractor.feed(text)
        except DialectError as error:
            self._fed = (text, error)
            return False
        if segments:
            self._fed = (text, segments)
            return False
        self.account("content", text, segments)
        if extractor.broken != broken:  # only this extractor was fed
            self._count_broken()
        return True

    def _feed(self, key: str, text: str) -> list[Segment]:
        """What the extractor of ``key`` gives for ``text``: fed now, or fed ahead by the hot
        path (``feed_held``)."""
        fed = self._fed
        if fed is not None and key == "content":
            self._fed = None
            assert fed[0] == text  # the chunk the hot path fed is the one parsed next
            if isinstance(fed[1], DialectError):
                raise fed[1]
            return fed[1]
        extractor = self.extractors[key]
        assert extractor is not None
        return extractor.feed(text)

    def extract_text(self, head: JSONObject, sink: Sink) -> None:
        """Take the calls out of the text fields of ``head`` (a delta without its calls)."""
        if self._think is not None:
            self._leading_think(head)
        for key in self._ctx.extract:
            text = head.get(key)
            if not isinstance(text, str) or not text or not self.extracting:
                continue
            if key not in self.extractors and self._plain(key, text):
                # what the extractor would give: the text whole, as one piece
                del head[key]
                sink.put(self._pieces.piece({key: text}))
                continue
            extractor = self._extractor(key)
            if extractor is None:
                continue
            del head[key]
            try:
                segments = self._feed(key, text)
            except DialectError:
                self._dialect_failed(key, text, sink)
                continue
            self.account(key, text, segments)
            self._count_broken()
            self._segments(key, segments, sink)
        # the leading text goes back into the head, where it came from
        if sink.own and isinstance(lead := sink.own[0].delta, FieldsDelta):
            del sink.own[0]
            head.update(lead.fields)

    def _leading_think(self, head: JSONObject) -> None:
        """A leading ``<think>`` block of the content moved to the reasoning field
        (``think_in_content``, chat/reasoning.py)."""
        think = self._think
        text = head.get("content")
        if think is None or not isinstance(text, str) or not text:
            return
        before = think.held
        reasoning, content = think.feed(text)
        self._ctx.held += think.held - before
        self._put_split(head, reasoning, content)
        if think.done:
            self._think_ended()

    def _put_split(self, head: JSONObject, reasoning: str, content: str) -> None:
        if reasoning:
            key = self._ctx.reasoning_field if self._ctx.reasoning_field != "keep" else FIELDS[0]
            earlier = head.get(key)
            head[key] = (earlier if isinstance(earlier, str) else "") + reasoning
        if content:
            head["content"] = content
        else:
            head.pop("content", None)

    def _think_ended(self) -> None:
        assert self._think is not None
        if self._think.found:
            self._ctx.repairs[Repair.THINK_IN_CONTENT] += 1
        self._think = None
        self.extracting = bool(self._ctx.extract)

    def passes(self, text: str) -> bool:
        """Whether content ``text`` goes out as it came, unfed (the hot path): the content's
        extractor says so, or none was built yet and its start went out as plain text."""
        if "content" not in self.extractors:
            if "content" not in self._begun or self._think is not None:
                return False
            plain = dialects.plain_text(self._ctx.dialect_names)
            return plain is not None and plain.later(text)
        extractor = self.extractors["content"]
        return extractor is not None and extractor.passes(text)

    def _names(self, key: str) -> tuple[str, ...]:
        return self._ctx.dialect_names if key == "content" else self._ctx.reasoning_dialect_names

    def _plain(self, key: str, text: str) -> bool:
        """Whether ``text`` of a field with no extractor yet would come back from one whole;
        the extractor is built at the first text that may hold markup (issue 29: most
        streams' never does, and building it was most of a short stream's set-up)."""
        plain = dialects.plain_text(self._names(key))
        if plain is None:
            return False  # no extractor either: the text stays where it is
        if key in self._begun:
            return plain.later(text)
        if not plain.at_start(text):
            return False
        if text.lstrip(WHITESPACE):
            self._begun.add(key)
        return True

    def _extractor(self, key: str) -> Extractor | None:
        if key not in self.extractors:
            self.extractors[key] = dialects.build_extractor(
                self._names(key), self._ctx.tools, begun=key in self._begun
            )
            self.open_calls[key] = None
            self._held_text[key] = HeldText()
        return self.extractors[key]

    def account(self, key: str, text: str, segments: list[Segment]) -> None:
        """Follow the text an extractor holds: for the stream's cap, and to give it back if the
        extractor fails. Plain text answers are matched against what was fed; once markup was
        consumed the held part is unknown and counted as nothing (dialects hold little then)."""
        held = self._held_text[key]
        before = len(held)
        held.follow(text, segments)
        after = len(held)
        if after and not before:
            self._held_since = len(self._calls.records)
        self._ctx.held += after - before

    def _count_broken(self) -> None:
        """Count the calls whose markup broke or stopped and went back as text (issue 24
        item 4): ``markup-broken``."""
        broken = sum(e.broken for e in self.extractors.values() if e is not None)
        if broken > self._broken:
            self._ctx.repairs[Repair.MARKUP_BROKEN] += broken - self._broken
        self._broken = broken

    def _segments(self, key: str, segments: list[Segment], sink: Sink) -> None:
        at, count = 0, len(segments)
        while at < count:
            seg = segments[at]
            at += 1
            call = self.open_calls.get(key)
            if call is not None and type(seg) is CallArgs:
                # the argument pieces in a row of a call (a held call released whole comes
                # as a hundred): one run for the driver, each piece still its own input
                texts = [seg.text] if seg.text else []
                while at < count and type(nxt := segments[at]) is CallArgs:
                    if nxt.text:
                        texts.append(nxt.text)
                    at += 1
                self._calls.args(call, texts, sink)
                continue
            match seg:
                case Text(text=text):
                    if text:
                        sink.put(self._pieces.piece({key: text}))
                case CallOpen(name=name, id=ident):
                    self._ctx.repairs[
                        markup_kind(self.extractors.get(key), self._ctx.dialect_names)
                    ] += 1
                    call = self._pieces.new_call(None, ident, markup=True)
                    self._calls.records.append(call)
                    self.open_calls[key] = call
                    self._calls.release_others(call, sink)
                    call.name = name
                    self._input(call, self._calls.naming(call, ""), "", sink)
                case CallArgs(text=text):
                    if call is not None and text:
                        self._input(call, CallInput.ARGS, text, sink)
                    elif text:  # outside a call (a dialect bug): keep the text as text
                        sink.put(self._pieces.piece({key: text}))
                case CallClose():
                    if call is not None and closes_whole(self._calls.table, call.state):
                        call.whole = True
                        self._calls.send_whole_calls(sink)
                    elif call is not None:
                        self._input(call, CallInput.END, "", sink)
                    self.open_calls[key] = None

    def stop(self, sink: Sink) -> None:
        """Close the extractors: the end of the choice."""
        if self._think is not None:
            self._ctx.held -= self._think.held
            reasoning, content = self._think.close()
            head: JSONObject = {}
            self._put_split(head, reasoning, content)
            if head:
                sink.put(self._pieces.piece(head))
            self._think_ended()
        self.extracting = False
        for key, extractor in self.extractors.items():
            if extractor is None:
                continue
            try:
                segments = extractor.close()
            except DialectError:
                self.extractors[key] = None
                self._dialect_failed(key, "", sink)
                continue
            held = self._held_text[key].take()
            self._ctx.held -= len(held)
            if key == "content" and self._fragment_of_a_call(held, segments):
                segments = []
                self._ctx.repairs[Repair.MARKUP_FRAGMENT_DROPPED] += 1
                self._broken = sum(e.broken for e in self.extractors.values() if e is not None)
            # a block still open when its text ends is given back as text, counted
            self._count_broken()
            self.extractors[key] = None
            self._segments(key, segments, sink)

    def _fragment_of_a_call(self, held: str, segments: list[Segment]) -> bool:
        """Whether the text given back at the end is an unfinished block of markup whose
        name, or the beginning of it, is that of a structured call that came after it: the
        server left the call's first tokens in the content and then sent it parsed (llama.cpp
        b6522 with Qwen3-Coder; issue 24 item 3). Such a fragment is no text of the model's."""
        if not held or not all(isinstance(s, Text) for s in segments):
            return False
        if "".join(s.text for s in segments if isinstance(s, Text)) != held:
            return False
        named = self._calls.records[self._held_since :]
        return any(
            not call.from_markup and call.name and names_call(held, call.name) for call in named
        )

    def _dialect_failed(self, key: str, text: str, sink: Sink) -> None:
        """Fail open: the text the extractor held (as far as known) and the text it choked on
        go out as text, and extraction stops for the choice."""
        self._record(Repair.DIALECT_ERROR)
        self.extractors[key] = None
        held = self._held_text[key]
        self._ctx.held -= len(held)
        lost = held.take() + text
        if lost:
            sink.put(self._pieces.piece({key: lost}))
        self.stop(sink)
