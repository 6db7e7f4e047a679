"""What the dialects share: the parser of one block of markup, and the fork between dialects.

A *block* starts at an opening marker found by the extractor (``<tool_call>``,
``[TOOL_CALLS]`` ...) and ends where the dialect's markup ends. The extractor feeds the block
everything after the marker; the block answers with a :class:`Step`:

* segments for the calls it parsed so far (CallOpen, CallArgs, CallClose);
* ``rest`` once the block is over: the text after it, which the extractor scans again;
* ``failed`` when nothing in it turned out to be a call: the extractor releases the marker as
  text and scans ``rest`` (everything after the marker) again. That is the fail-open rule:
  markup that does not parse is content, unchanged.

A call's segments are held until its markup is complete (issue 24 item 4): a call is given
out whole, at its end, or not at all. Markup that breaks or stops inside a call (a JSON list
that never closes, a block cut by the token limit) is therefore never half a call: the call
is dropped and its text goes back to the scanner as it came, from the end of the block's last
complete call (the whole block, marker included, when it was the first). What is held counts
toward the caller's cap (``held``) as before.

:class:`BlockParser` gives each dialect a buffer, a cursor, small matching helpers and a
state table (``STEPS``: state -> handler). A handler returns True when it moved on, False
when it needs more text, and raises :class:`Broken` when the markup is not the dialect's.
A state that only expects a literal gets its handler from :func:`expect`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, ClassVar, Final, Protocol

from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Tools
from proxy.core.markup.params import Schema, parameter_schemas
from proxy.core.markup.scan import Found, MarkerScanner

DONE: Final = "done"
WHITESPACE: Final = " \t\r\n"


class Broken(Exception):
    """The text is not (or no longer) the dialect's markup; the message says why."""


@dataclass(slots=True)
class Step:
    segments: list[Segment] = field(default_factory=list)
    rest: str | None = None
    failed: bool = False
    broken: bool = False  # a call's markup broke or stopped, and its text is in ``rest``


class Block(Protocol):
    def feed(self, text: str) -> Step: ...

    def close(self) -> Step: ...

    def takes_run(self, text: str) -> bool:
        """Whether ``feed(text)`` would give nothing and only add ``text`` to the held call's
        arguments (a run of ordinary characters inside one of their JSON strings); if so,
        ``text`` is taken as ``feed`` takes it. False is always safe and changes nothing."""
        ...

    @property
    def held(self) -> int: ...


# A handler is a method of the subclass: (self, final) -> moved on.
Handler = Callable[[Any, bool], bool]


class BlockParser:
    """Base of every dialect's block parser; subclasses fill ``STEPS`` and ``state``."""

    STEPS: ClassVar[Mapping[str, Handler]]

    def __init__(self, marker: str, state: str) -> None:
        self.marker = marker
        self.state = state
        self.buf = ""
        self.pos = 0
        self.committed = 0  # end of the last closed call: fail-open restarts here
        self.calls = 0
        self.open = False
        self.gathered: list[str] = []  # what gather() took so far
        self._out: list[Segment] = []
        self._call: list[Segment] = []  # the open call's segments, held until it closes
        # The open call's text trimmed out of ``buf`` (the buffer is trimmed so that a long
        # call does not make every append copy it), kept to be given back if the call breaks.
        self._kept: list[str] = []
        self._kept_len = 0

    # -- the Block protocol ------------------------------------------------------------------

    def feed(self, text: str) -> Step:
        self.buf += text
        return self._run(final=False)

    def close(self) -> Step:
        return self._run(final=True)

    def takes_run(self, text: str) -> bool:
        return False  # the dialects that read arguments as JSON say otherwise (jsonscan)

    @property
    def held(self) -> int:
        if not self.calls:
            return len(self.marker) + self._kept_len + len(self.buf)
        return self._kept_len + len(self.buf) - self.committed

    # -- driving the state table -------------------------------------------------------------

    def _run(self, final: bool) -> Step:
        self._out = []
        try:
            while self.state != DONE:
                if not self.STEPS[self.state](self, final):
                    if final:
                        raise Broken(self._ended_early())
                    self._trim()
                    return Step(self._out)
        except Broken as exc:
            return self._broken(str(exc))
        return Step(self._out, rest=self.buf[self.pos :])

    def _ended_early(self) -> str:
        return f"markup ended early (in {self.state})"

    def _broken(self, reason: str) -> Step:
        # The open call, if any, is dropped whole: its text is given back with the rest.
        broken = self.open
        self._call = []
        self.open = False
        given = "".join(self._kept) + self.buf[self.committed :]
        if not self.calls:
            return Step([], rest=given, failed=True, broken=broken)
        return Step(self._out, rest=given, broken=broken)

    def _trim(self) -> None:
        # Keep only what fail-open may still have to give back; inside a call, the part
        # already read moves to ``_kept``, so a long call does not make every later append
        # copy the whole block.
        cut = self.pos if self.open else (self.committed if self.calls else 0)
        if cut:
            if self.open:
                taken = self.buf[self.committed : cut]
                self._kept.append(taken)
                self._kept_len += len(taken)
            self.buf = self.buf[cut:]
            self.pos -= cut
            self.committed = 0 if self.open else self.committed - cut

    # -- emitting ----------------------------------------------------------------------------

    def emit(self, *segments: Segment) -> None:
        """A call's segments: held from its opening; given out at its close, or dropped
        (``Broken``) when it closes with an error."""
        for segment in segments:
            if isinstance(segment, CallOpen):
                self.open = True
                self._call = [segment]
            elif isinstance(segment, CallClose):
                if segment.error is not None:
                    raise Broken(segment.error)
                self.open = False
                self.calls += 1
                self.committed = self.pos
                self._out += self._call
                self._out.append(segment)
                self._call = []
                self._kept = []
                self._kept_len = 0
            elif not isinstance(segment, CallArgs) or segment.text:
                self._call.append(segment)

    def emit_args(self, text: str) -> None:
        """``emit(CallArgs(text))`` inside the open call (``takes_run``'s one segment)."""
        if text:
            self._call.append(CallArgs(text))

    # -- matching helpers: each returns None when more text is needed ------------------------

    def text_follows(self, final: bool, missing: str) -> bool:
        """Skip whitespace; whether text follows (False: more may come). At the end of the
        markup, raise ``missing``."""
        self.skip_ws()
        if not self.at_end():
            return True
        if final:
            raise Broken(missing)
        return False

    def skip_ws(self) -> None:
        buf, pos = self.buf, self.pos
        while pos < len(buf) and buf[pos] in WHITESPACE:
            pos += 1
        self.pos = pos

    def at_end(self) -> bool:
        return self.pos >= len(self.buf)

    def peek(self) -> str:
        return self.buf[self.pos : self.pos + 1]

    def literal(self, options: Sequence[str], final: bool) -> str | None:
        """Consume the first of ``options`` the text starts with; raise if it can be none."""
        rest = self.buf[self.pos :]
        for option in options:
            if rest.startswith(option):
                self.pos += len(option)
                return option
        if not final and any(option.startswith(rest) for option in options):
            return None
        raise Broken(f"expected {' or '.join(map(repr, options))}, got {rest[:1]!r}")

    def optional(self, options: Sequence[str], final: bool) -> str | None:
        """An optional literal after optional whitespace: the option (consumed with the
        whitespace), "" when none follows (nothing consumed), None while that is undecided."""
        rest = self.buf[self.pos :]
        stripped = rest.lstrip(WHITESPACE)
        for option in options:
            if stripped.startswith(option):
                self.pos += len(rest) - len(stripped) + len(option)
                return option
        if not final and (not stripped or any(o.startswith(stripped) for o in options)):
            return None
        return ""

    def until(self, scanner: MarkerScanner, final: bool) -> tuple[str, Found | None]:
        """The text up to the next marker (which is consumed) or as far as is safe."""
        end, found = scanner.scan(self.buf, self.pos, final=False)
        text = self.buf[self.pos : end]
        self.pos = found.end if found else end
        return text, found

    def gather(self, scanner: MarkerScanner, final: bool) -> str | None:
        """The text up to the next marker (which is consumed), taken over as many feeds as it
        takes; None until the marker arrives."""
        text, found = self.until(scanner, final)
        self.gathered.append(text)
        if found is None:
            return None
        whole = "".join(self.gathered)
        self.gathered = []
        return whole

    def name(self, allowed: Callable[[str], bool], stops: str, final: bool) -> str | None:
        """A run of characters allowed in a name, ended by one of ``stops`` (not consumed)."""
        buf, pos = self.buf, self.pos
        while pos < len(buf) and allowed(buf[pos]):
            pos += 1
        if pos == len(buf):
            if final:
                raise Broken("markup ended in a name")
            return None
        if pos == self.pos:
            raise Broken(f"expected a name, got {buf[pos : pos + 1]!r}")
        if buf[pos] not in stops:
            raise Broken(f"unexpected {buf[pos]!r} after a name")
        found = buf[self.pos : pos]
        self.pos = pos
        return found


def expect(options: Sequence[str], then: str) -> Handler:
    """The handler of a state that expects one of ``options`` (after whitespace), then goes
    on to ``then``."""

    def handler(block: BlockParser, final: bool) -> bool:
        block.skip_ws()
        if block.literal(options, final) is None:
            return False
        block.state = then
        return True

    return handler


def name_char(char: str) -> bool:
    """Characters of a function name as the dialects write it (OpenAI's set, dots, colons)."""
    return char.isalnum() or char in "_-.:"


class Fork:
    """The block of every dialect that opens with a marker (several share ``<tool_call>``):
    feed all, keep the first that emits anything; the block fails only when every candidate
    has failed. Each block comes with its dialect's name; ``dialect`` names the one kept once
    that is decided (at once when there is only one)."""

    def __init__(self, blocks: Sequence[tuple[str, Block]]) -> None:
        self._blocks = list(blocks)

    @property
    def dialect(self) -> str | None:
        return self._blocks[0][0] if len(self._blocks) == 1 else None

    def feed(self, text: str) -> Step:
        return self._pick([block.feed(text) for _, block in self._blocks])

    def close(self) -> Step:
        return self._pick([block.close() for _, block in self._blocks])

    def takes_run(self, text: str) -> bool:
        # a block inside a call's arguments is the only one left: the others broke on them
        blocks = self._blocks
        return len(blocks) == 1 and blocks[0][1].takes_run(text)

    @property
    def held(self) -> int:
        return max(block.held for _, block in self._blocks)

    def _pick(self, steps: list[Step]) -> Step:
        alive: list[tuple[str, Block]] = []
        for named, step in zip(self._blocks, steps, strict=True):
            if step.failed:
                continue
            if step.segments or step.rest is not None:
                self._blocks = [named]
                return step
            alive.append(named)
        if not alive:  # all failed: the text is the same; say whether a call broke in it
            return next((step for step in steps if step.broken), steps[-1])
        self._blocks = alive
        return Step()


class Dialect:
    """A family of tool-call markup: the markers that open its blocks, and its block parser.

    ``openers`` are recognised anywhere in the content; ``start_openers`` only where the
    content starts (leading whitespace aside), for markup that has no marker of its own.

    ``word_openers`` are openers made of ordinary words (markup whose special tokens the
    server dropped). Looked for anywhere, they would hold back every piece of text that ends
    like their beginning (`` a``, ``basic``). So they are recognised where the content starts,
    and anywhere only in content that starts with one of ``word_starts``: the words such a
    stream of the dialect begins with.

    ``in_reasoning``: the dialect's models are known to write their calls inside their
    reasoning, where ``extract_from_reasoning = "auto"`` looks for this dialect's markup.
    """

    name: ClassVar[str]
    openers: ClassVar[tuple[str, ...]] = ()
    start_openers: ClassVar[tuple[str, ...]] = ()
    word_openers: ClassVar[tuple[str, ...]] = ()
    word_starts: ClassVar[tuple[str, ...]] = ()
    in_reasoning: ClassVar[bool] = False

    def __init__(self, tools: Tools) -> None:
        self.tools = tools

    @cached_property
    def schemas(self) -> dict[str, dict[str, Schema]]:
        """Function name -> parameter name -> its schema, for the dialects that type values.
        Worked out only when markup of this dialect turns up: every stream that offers tools
        builds every dialect, and most never see markup."""
        return parameter_schemas(self.tools)

    def declared(self, name: str) -> bool:
        """Whether the request declared a function of that name (guards marker-less markup)."""
        return name in self.schemas

    def block(self, marker: str) -> Block:
        raise NotImplementedError
