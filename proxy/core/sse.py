"""Incremental Server-Sent Events codec, free of I/O.

Rules this module keeps (WHATWG HTML, "event stream interpretation"):

* Lines end in CRLF, LF or CR, and an ending may be split across reads. A CR that ends the
  buffer is not taken as a line end until the next byte shows whether an LF follows it, or
  until :meth:`SSEDecoder.close`.
* A blank line ends an event. Every byte the decoder is fed comes back exactly once, inside
  the ``raw`` of an :class:`Event` or a :class:`RawBytes`, in order. That is what lets the
  proxy forward an event it does not rewrite as ``ev.raw`` without touching a byte.
* Work stays on bytes. ``data`` is the joined data lines as bytes (orjson parses bytes and
  checks UTF-8 itself); only the short ``event``/``id`` values and unknown fields are
  decoded, leniently.
* Each buffer position is scanned once (h11's linear-time rule): ``_scan`` remembers how far
  the pending buffer has been searched for line ends. A read that starts a new event and
  holds no CR first has its whole one-line ``data:`` events cut off directly (what every
  upstream sends); the line machine takes the rest, and the events are the same.
* An event larger than ``max_event_bytes`` is not buffered further, nor parsed when it came
  whole in one read: its bytes (and the rest of the buffer) come out as
  ``RawBytes(reason="oversize")`` and every later read is passed on the same way, however the
  reads were cut. Failing open keeps every byte flowing when the stream is not something we
  can parse.

``feed`` and ``close`` raise nothing; an empty list from ``feed`` means "need more data".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Literal

DEFAULT_MAX_EVENT_BYTES: Final = 1 << 20
_LINE_END: Final = re.compile(rb"\r\n|\r|\n")
_BOM: Final = b"\xef\xbb\xbf"
_NOTHING: Final[tuple[()]] = ()


@dataclass(frozen=True, slots=True)
class Event:
    """One blank-line-terminated block of the stream, with the exact bytes it came from.

    A block of comments only (or a stray blank line) is an Event too, with ``data`` None, so
    that it is forwarded in place. ``fields`` keeps fields the spec tells clients to ignore,
    such as llama.cpp's ``error:`` line, in the order they came.
    """

    raw: bytes
    data: bytes | None = None
    event: str | None = None
    id: str | None = None
    retry: int | None = None
    fields: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RawBytes:
    """Bytes that do not form a complete event; they are forwarded as they are.

    ``unterminated``: the stream ended inside an event. ``oversize``: an event outgrew the
    cap, so this block and every later read of the stream are passed through unparsed.
    """

    raw: bytes
    reason: Literal["unterminated", "oversize"]


class SSEDecoder:
    """Split a byte stream into :class:`Event` objects, one ``feed`` at a time."""

    def __init__(self, *, max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES) -> None:
        self._max = max_event_bytes
        self._buf = bytearray()
        self._scan = 0  # how far _buf has been searched for line ends
        self._line_start = 0
        self._first_line = True
        self._oversize = False
        self._reset_fields()

    @property
    def pending(self) -> bool:
        """Bytes of an unfinished event are buffered: the next read continues it."""
        return bool(self._buf)

    @property
    def passthrough(self) -> bool:
        """True once an event outgrew the cap and the rest of the stream is not parsed."""
        return self._oversize

    def feed(self, chunk: bytes) -> list[Event | RawBytes]:
        if self._oversize:
            return [RawBytes(bytes(chunk), "oversize")] if chunk else []
        events: list[Event | RawBytes] = []
        if not self._buf and not self._first_line and b"\r" not in chunk:
            chunk = self._whole_data_events(chunk, events)
            if not chunk:
                return events
        self._buf += chunk
        self._parse(events, final=False)
        if len(self._buf) > self._max:
            self._oversize = True
            events.append(RawBytes(bytes(self._buf), "oversize"))
            self._buf.clear()
        return events

    def plain_events(self, chunk: bytes) -> int:
        """How many events ``chunk`` is when it is nothing but whole one-line ``data: `` events
        ending in LF LF, starting where the previous events ended; 0 for any other read.

        Such a read leaves the decoder as it found it, so a caller that finds nothing to change
        in its bytes may forward it whole without feeding it here (``whole_events``): a
        handful of byte counts in C instead of an Event per event.
        """
        if self._first_line and not self._buf and chunk.startswith(b"data: "):
            # no byte order mark: the first line is like any other, and feeding it would
            # leave the decoder so
            self._first_line = False
        if (
            self._buf
            or self._first_line
            or self._oversize
            or not chunk.endswith(b"\n\n")
            or not chunk.startswith(b"data: ")
            or b"\r" in chunk
            or len(chunk) > self._max  # it may hold an event over the cap: the decoder's to say
        ):
            return 0
        if chunk.find(b"\n") == len(chunk) - 2:  # one event (the usual read), counted cheaply
            return 1
        events = chunk.count(b"\n\n")
        if (
            chunk.count(b"\n") == 2 * events  # each event is one line and a blank one
            and chunk.count(b"\n\ndata: ") == events - 1  # and every line is a data line
        ):
            return events
        return 0

    def whole_events(self, chunk: bytes) -> tuple[Sequence[Event | RawBytes], bytes, int, bytes]:
        """One read as the whole-read fast path takes it, in one call: ``(decoded, plain,
        count, rest)``.

        ``decoded``: the events that end an event an earlier read began (fed here, as ``feed``
        gives them; the whole read when that event does not end in it). ``plain``: the whole
        one-line data events after them, ``count`` of them (``plain_events``; b"" and 0 when
        they are anything else), left unfed: such events leave the decoder as it is, so a
        caller that finds nothing to change in them may forward ``plain`` as it came, else it
        feeds it. ``rest``: the bytes after them, unfed; the caller feeds them after
        ``plain``. A read that is nothing but plain events comes back as ``plain`` itself,
        the very bytes object.
        """
        if not self._buf:
            count = self.plain_events(chunk)
            if count:  # the usual read: whole plain events and nothing else
                return _NOTHING, chunk, count, b""
        decoded: Sequence[Event | RawBytes] = _NOTHING
        if self._buf:
            end = chunk.find(b"\n\n") + 2
            if end < 2:
                return self.feed(chunk), b"", 0, b""
            decoded = self.feed(chunk[:end])
            chunk = chunk[end:]
        end = chunk.rfind(b"\n\n") + 2
        if end < 2:
            return decoded, b"", 0, chunk
        whole = chunk[:end]  # the very object when the read ends with its last event
        count = self.plain_events(whole)
        if not count:
            return decoded, b"", 0, chunk
        return decoded, whole, count, chunk[end:]

    def _whole_data_events(self, chunk: bytes, events: list[Event | RawBytes]) -> bytes:
        """The common read, without the line machine: whole events of one ``data: `` line
        ending in LF LF, with nothing pending before them. Returns the bytes it left (from the
        first event of any other form on) for the line machine."""
        start = 0
        while (end := chunk.find(b"\n\n", start)) >= 0:
            if (
                not chunk.startswith(b"data: ", start)
                or chunk.find(b"\n", start, end) >= 0
                or end + 2 - start > self._max  # over the cap: the line machine's to pass on
            ):
                break
            events.append(Event(chunk[start : end + 2], chunk[start + 6 : end]))
            start = end + 2
        return chunk[start:] if start else chunk

    def close(self) -> list[Event | RawBytes]:
        """End of stream: a trailing CR counts as a line end; an unfinished event comes back raw."""
        if self._oversize:
            return []
        events: list[Event | RawBytes] = []
        self._parse(events, final=True)
        if self._buf:
            events.append(RawBytes(bytes(self._buf), "unterminated"))
            self._buf.clear()
        self._scan = self._line_start = 0
        self._reset_fields()
        return events

    def _reset_fields(self) -> None:
        self._data: list[bytes] = []
        self._event: str | None = None
        self._id: str | None = None
        self._retry: int | None = None
        self._fields: list[tuple[str, str]] = []

    def _parse(self, events: list[Event | RawBytes], *, final: bool) -> None:
        buf = self._buf
        consumed = 0  # bytes of buf already handed out in events
        while True:
            match = _LINE_END.search(buf, self._scan)
            if match is None:
                self._scan = len(buf)
                break
            start, end = match.span()
            if end == len(buf) and end - start == 1 and buf[start] == 0x0D and not final:
                # A CR at the end of the buffer may be the first half of a CRLF.
                self._scan = start
                break
            line = bytes(buf[self._line_start : start])
            self._scan = self._line_start = end
            if line:
                self._take_line(line)
            elif end - consumed > self._max:  # a whole event over the cap, as one outgrowing it
                self._oversize = True
                events.append(RawBytes(bytes(buf[consumed:]), "oversize"))
                buf.clear()
                self._scan = self._line_start = 0
                self._reset_fields()
                return
            else:
                events.append(self._dispatch(bytes(buf[consumed:end])))
                consumed = end
        if consumed:
            del buf[:consumed]
            self._scan -= consumed
            self._line_start -= consumed

    def _take_line(self, line: bytes) -> None:
        if self._first_line:
            self._first_line = False
            if line.startswith(_BOM):
                line = line[len(_BOM) :]
        if line[:1] == b":":
            return  # a comment; its bytes stay in the event's raw
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            if b"\x00" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry":
            if value.isdigit():
                self._retry = int(value)
        else:
            self._fields.append((name.decode("utf-8", "replace"), value.decode("utf-8", "replace")))

    def _dispatch(self, raw: bytes) -> Event:
        event = Event(
            raw=raw,
            data=b"\n".join(self._data) if self._data else None,
            event=self._event,
            id=self._id,
            retry=self._retry,
            fields=tuple(self._fields),
        )
        self._reset_fields()
        return event


# -- the data of plain events: what the whole-read fast paths know of the framing ----------
# A caller that forwards whole events unfed (chat/sse_stream.py, through ``whole_events``)
# reads their data only through these, so that framing stays known here alone.


def plain_data(event: bytes) -> bytes:
    """The data of one whole one-line data event (``plain_events`` counted it as one)."""
    return event[6:-2]


def plain_datas(read: bytes) -> list[bytes]:
    """The data of each event of a read of whole one-line data events (``plain_events``)."""
    return [event[6:] for event in read[:-2].split(b"\n\n")]


def done_in(read: bytes, events: int) -> bool:
    """Whether a read of ``events`` whole one-line data events (``plain_events``) may hold
    Chat Completions' ``[DONE]``: an event whose data starts with it. Looked for where each
    event's data starts, so that the usual read of one event costs no search."""
    if read.startswith(b"data: [DONE]"):
        return True
    return events > 1 and b"\n\ndata: [DONE]" in read


def encode_event(data: bytes, *, event: str | None = None) -> bytes:
    """Encode one event; ``data`` may hold newlines, each becomes its own data line."""
    head = b"event: " + event.encode() + b"\n" if event is not None else b""
    if b"\n" not in data:  # a chunk written by orjson: one line
        return head + b"data: " + data + b"\n\n"
    lines = data.split(b"\n")
    return head + b"".join(b"data: " + line + b"\n" for line in lines) + b"\n"


def data_frame(event: str | None = None) -> tuple[bytes, bytes]:
    """The bytes ``encode_event`` writes before and after data of one line: what a run of
    events the same but for their data is written around."""
    head = b"event: " + event.encode() + b"\n" if event is not None else b""
    return head + b"data: ", b"\n\n"


DONE: Final = b"data: [DONE]\n\n"


def is_done(data: bytes | None) -> bool:
    """Whether an event's data is Chat Completions' end marker, ``[DONE]``."""
    return data is not None and data.strip() == b"[DONE]"


def slices(data: bytes, size: int) -> list[bytes]:
    """``data`` cut into parts of a little over ``size`` bytes, each ending after a blank line
    (else after a line end) where one follows: so that the work of one huge read can be
    spread out (proxy/shell/pump.py). The decoder gives the same events however its input is
    cut, and parts of whole events keep the fast paths. A read no longer than ``size``
    comes back as the very bytes object."""
    if len(data) <= size:
        return [data]
    parts: list[bytes] = []
    start = 0
    while len(data) - start > size:
        end = data.find(b"\n\n", start + size) + 2
        if end == 1:
            end = data.find(b"\n", start + size) + 1
            if end == 0:
                break
        parts.append(data[start:end])
        start = end
    if start < len(data):
        parts.append(data[start:])
    return parts
