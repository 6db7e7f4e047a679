"""A chat upstream's stream for a client of another protocol: repair as chat, then translate.

Upstream bytes go through the chat stream (chat/sse_stream.py: every chat repair and markup
dialect), whose normalizer's typed output (chat/sent.py) the bridge's writer reads as neutral
events for the client protocol's encoder (chat/neutral.py), where a chat client's stream
writes it as canonical chunks: nothing is rendered to be parsed again.
The bridge has the chat stream's verbs (``feed(bytes)``, ``close(complete=...)``), so the
shell drives it as it drives a chat stream.

The one rule of its own: chat bytes never reach a client of another protocol. The chat path
fails open by forwarding the upstream's bytes as they came (past the cap, or past an event
too large to parse); here that ends the stream with the protocol's failure event instead
(``Failed``), and so does a response whose encoder keeps more to repeat (text and arguments,
for the protocol's ``.done`` events and whole response) than ``limits.max_response_body_bytes``.
After the failure the bridge is ``over``: the shell reads no more of the upstream's body.

``translate_whole`` is the same path for a client that asked for one object (``stream:
false``) from an upstream that streamed anyway: the whole body through the bridge, the
protocol's SSE dropped, the encoder's object kept; a cut body or a failure is no object.
"""

from __future__ import annotations

from dataclasses import dataclass

from proxy.core.events import Failed, StreamEvent
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.base import Encoder
from proxy.core.protocols.chat.neutral import NeutralWriter
from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream

GAVE_UP = (
    "the proxy could not rewrite the upstream's stream (it outgrew limits.max_held_bytes,"
    " limits.max_response_body_bytes or limits.max_event_bytes)"
)
TOO_LONG = "the response outgrew limits.max_response_body_bytes"


class ChatBridge:
    def __init__(self, chat: ChatSSEStream, encoder: Encoder) -> None:
        self.normalizer: StreamNormalizer = chat.normalizer
        self._chat = chat
        self._encoder = encoder
        self._limit = self.normalizer.options.max_response_body_bytes
        # the text calls that went out keep for the checks counts toward the response's own
        # limit, not toward max_held_bytes: past it the response fails (chat.normalize)
        self.normalizer.kept_limit = self._limit
        self._events = NeutralWriter()
        self._failed = False

    @property
    def over(self) -> bool:
        """The response ended with its failure event: no upstream byte can change it."""
        return self._failed

    def feed(self, chunk: bytes) -> list[bytes]:
        if self._failed:
            return []
        self._events.write(self._chat.feed_sent(chunk))
        return self._translate()

    def close(self, *, complete: bool) -> list[bytes]:
        if self._failed:
            return []
        self._events.write(self._chat.close_sent(complete=complete))
        out = self._translate()
        if self.normalizer.gave_up:  # the chat stream gave up while it closed
            return out
        return out + self._encode(self._events.close(complete=complete))

    def _translate(self) -> list[bytes]:
        events = self._events.take()
        if self.normalizer.gave_up:
            # what the give-up released is chat the client may not get: the failure instead
            self._failed = True
            return self._encode([Failed(GAVE_UP, "proxy_error")])
        out = self._encode(events)
        if self._encoder.kept > self._limit:
            self._failed = True
            out += self._encode([Failed(TOO_LONG, "proxy_error")])
        return out

    def _encode(self, events: list[StreamEvent]) -> list[bytes]:
        encoder = self._encoder
        return [data for event in events for data in encoder.feed(event)]


@dataclass(frozen=True, slots=True)
class Whole:
    """A whole streamed body, translated: the protocol's object, or why there is none."""

    answer: JSONObject | None
    error: str = ""


def translate_whole(chat: ChatSSEStream, encoder: Encoder, body: bytes, *, complete: bool) -> Whole:
    """``body``, a chat upstream's whole SSE answer (``complete``: it ended cleanly), as the
    one object of ``encoder``'s protocol."""
    watched = _FailureWatch(encoder)
    bridge = ChatBridge(chat, watched)
    bridge.feed(body)
    bridge.close(complete=complete)
    if watched.failure is not None:
        return Whole(None, watched.failure.message)
    if not complete:
        return Whole(None, "the upstream's stream did not arrive whole (cut off, stalled, too big)")
    return Whole(encoder.response())


class _FailureWatch:
    """An encoder seen through: its SSE bytes are not wanted, the first failure is kept."""

    def __init__(self, encoder: Encoder) -> None:
        self._encoder = encoder
        self.failure: Failed | None = None

    def feed(self, event: StreamEvent) -> list[bytes]:
        if isinstance(event, Failed) and self.failure is None:
            self.failure = event
        self._encoder.feed(event)
        return []

    def response(self) -> JSONObject:
        return self._encoder.response()

    @property
    def kept(self) -> int:
        return self._encoder.kept
