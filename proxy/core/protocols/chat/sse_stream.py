"""A streamed chat completion's body through the core: upstream bytes in, client bytes out.

The SSE decoder (proxy/core/sse.py) cuts the bytes into events and the normalizer
(chat/normalize.py) rewrites them into its typed output (chat/sent.py), which
:meth:`ChatSSEStream.feed` writes as chat bytes (``chat_bytes``); the bridge reads the same
output as neutral events instead (``feed_sent``, proxy/core/bridge.py).

Most reads of most streams need nothing: text deltas of a request that offered no tools, a
canonical stream's chunks, text or argument deltas that repeat the bytes of one that took a
hot path. Such a read, when it is whole one-line data events that the normalizer can judge
without decoding them (``feed_read``, a fast path: off with the normalizer's ``fast``), goes
out as the very bytes object that came in (or, for a call held in markup, as nothing),
without an Event made or a chunk parsed; the decoder's and the normalizer's states
after it are what feeding it would have left.
"""

from __future__ import annotations

from collections.abc import Callable

from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.chat.sent import ReadSent, Sent, chat_bytes
from proxy.core.sse import SSEDecoder


class ChatSSEStream:
    """The body of one streamed chat completion through the core: ``feed`` each upstream
    read, ``close`` at its end. What the shell's pump drives (``BodyTransform``)."""

    over = False  # a chat client's response ends where the upstream's does

    def __init__(self, normalizer: StreamNormalizer) -> None:
        self.normalizer = normalizer
        self.repairs = normalizer.repairs  # the normalizer's count, counted as it goes
        self.usage = normalizer.usage
        self._decoder = SSEDecoder(max_event_bytes=normalizer.options.max_event_bytes)
        # asked of every read: bound once, and the fast switch read once (off, no read is
        # whole and what is not is decoded)
        self._feed_read = normalizer.feed_read
        if normalizer.fast:
            self._plain_events: Callable[[bytes], int] = self._decoder.plain_events
            self._rest: Callable[[bytes], list[Sent]] = self._cut
        else:
            self._plain_events, self._rest = _no_events, self._decode

    @property
    def held_bytes(self) -> int:
        """What the normalizer holds back now, which max_held_bytes bounds."""
        return self.normalizer.held_bytes

    def feed(self, chunk: bytes) -> list[bytes]:
        """The bytes to write to the client for one upstream read, in order (``feed_sent``'s
        output written as chat bytes). A read judged whole is asked for its chat bytes alone
        (``feed_read`` without texts): the usual read, the read as it came or one event, makes
        no value and no list for the writer."""
        events = self._plain_events(chunk)
        if events:
            fast = self._feed_read(chunk, events, False)
            if type(fast) is bytes:
                return [fast]
            if fast is None:
                return chat_bytes(self._decode(chunk))
            # nothing to write: an event of a call held in markup (chat/fast.py HeldRepeat)
            return chat_bytes(_listed(fast)) if fast else []
        return chat_bytes(self._rest(chunk))

    def close(self, *, complete: bool) -> list[bytes]:
        """The bytes that end the stream (what the decoder and normalizer held, the missing
        finish and ``[DONE]``); ``complete``: the upstream's body ended cleanly."""
        return chat_bytes(self.close_sent(complete=complete))

    def feed_sent(self, chunk: bytes) -> list[Sent]:
        """The normalizer's output for one upstream read, in order."""
        events = self._plain_events(chunk)
        if events:  # the usual read, whole events that need no cutting (nor a call to cut)
            fast = self._feed_read(chunk, events)
            return self._decode(chunk) if fast is None else _listed(fast)
        return self._rest(chunk)

    def _cut(self, chunk: bytes) -> list[Sent]:
        """A read that is not whole one-line events: it need not end where an event does (an
        unthrottled upstream's reads rarely do). The end of an event an earlier read began,
        and the start of one the next read ends, are decoded; the whole events between them
        may still go out whole (the decoder's ``whole_events``, one call)."""
        normalizer = self.normalizer
        decoded, plain, count, rest = self._decoder.whole_events(chunk)
        out = [sent for item in decoded for sent in normalizer.feed(item)]
        if count:
            fast = self._feed_read(plain, count)
            out += self._decode(plain) if fast is None else _listed(fast)
        if rest:
            out += self._decode(rest)
        return out

    def close_sent(self, *, complete: bool) -> list[Sent]:
        """The normalizer's output that ends the stream."""
        out = [sent for item in self._decoder.close() for sent in self.normalizer.feed(item)]
        return out + self.normalizer.close(complete=complete)

    def _decode(self, data: bytes) -> list[Sent]:
        normalizer = self.normalizer
        return [sent for item in self._decoder.feed(data) for sent in normalizer.feed(item)]


def _no_events(chunk: bytes) -> int:
    """``plain_events`` with every fast path off: no read is taken whole."""
    return 0


def _listed(fast: ReadSent) -> list[Sent]:
    return fast if isinstance(fast, list) else [fast]
