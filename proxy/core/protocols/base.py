"""What a client protocol gives the core's facade (proxy/core/streams.py): the interfaces.

A protocol is a decoder and an encoder: its package builds one :class:`ClientProtocol`, and
proxy/core/protocols/registry.py names them all (Chat Completions among them), so nothing
outside a protocol's package knows its shapes.

Everything that serves one upstream's answers takes that upstream's ``UpstreamOptions`` and
the response's id factory by keyword: a new per-upstream setting is a field of the options,
never another argument down these signatures.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from proxy.core.events import StreamEvent
from proxy.core.jsonvalues import JSONObject
from proxy.core.options import UpstreamOptions
from proxy.core.usage import UsageSeen


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """A client's request translated to Chat Completions."""

    body: JSONObject  #: the chat request to send upstream
    context: object = None  #: what the protocol's encoder needs later (names, the model, ...)
    dropped: tuple[str, ...] = field(default=())  #: fields and tools a chat upstream cannot take


class Encoder(Protocol):
    """Neutral events in, the protocol's SSE bytes out; the whole response object on request."""

    def feed(self, event: StreamEvent) -> list[bytes]: ...

    def response(self) -> JSONObject: ...

    #: characters kept to be repeated (in later events, or the whole response object), which
    #: the bridge bounds by limits.max_response_body_bytes
    @property
    def kept(self) -> int: ...


class NativeStream(Protocol):
    """A server's own stream of the protocol, repaired in place (for Chat Completions, the
    chat stream every chat repair runs in)."""

    repairs: Counter[str]
    usage: UsageSeen  # the usage the upstream reported (proxy/core/usage.py)

    @property
    def held_bytes(self) -> int:
        """The upstream's bytes it holds back now, which max_held_bytes bounds."""
        ...

    def feed(self, chunk: bytes) -> list[bytes]: ...

    def close(self, *, complete: bool) -> list[bytes]: ...

    @property
    def over(self) -> bool:
        """The client's response is over: the shell reads no more of the upstream's body."""
        ...


class NativeStreamFactory(Protocol):
    """A server's own stream of the protocol, repaired in place as ``options`` (the upstream's)
    say; ``request`` is the client's parsed request body."""

    def __call__(
        self, *, new_id: Callable[[], str], request: object, options: UpstreamOptions
    ) -> NativeStream: ...


class NativeCompletion(Protocol):
    """A server's own whole (non-streamed) answer of the protocol, repaired in place: the body
    to send and the repairs it took."""

    def __call__(
        self, *, body: bytes, request: object, options: UpstreamOptions, new_id: Callable[[], str]
    ) -> tuple[bytes, Counter[str]]: ...


class EncoderFactory(Protocol):
    """Translate mode: the encoder of one response; ``context`` is ``ChatRequest.context``,
    ``stream`` whether the client asked for a stream (else the whole object is wanted)."""

    def __call__(self, *, context: object, new_id: Callable[[], str], stream: bool) -> Encoder: ...


def _whole_request(body: object) -> object:
    return body


@dataclass(frozen=True, slots=True)
class ClientProtocol:
    #: the protocol's name, and for one with a translate mode the per-upstream settings key
    #: that picks its mode ("responses", "messages"; proxy/settings.py derives the keys)
    name: str
    path_suffix: str  #: the client's request path ends with it ("/responses")
    native: NativeStreamFactory  #: its stream, repaired in place
    native_completion: NativeCompletion  #: its whole body, repaired in place
    #: translate mode (over a chat upstream): the request as a chat completion (raises
    #: ClientRequestError for a 400) and the encoder of the answer; None for Chat Completions
    to_chat: Callable[[JSONObject], ChatRequest] | None = None
    encoder: EncoderFactory | None = None
    #: (status, message) -> the protocol's error JSON; None: the proxy's own OpenAI shape,
    #: typed by the error (proxy/shell/middlewares.py)
    error_body: Callable[[int, str], bytes] | None = None
    #: what the repairer reads of the client's parsed request body, taken before the request
    #: goes out so that the rest of it can be let go (the whole body, by default)
    request_facts: Callable[[object], object] = _whole_request
    #: path suffix -> an answer the proxy gives itself in translate mode (count_tokens)
    local: dict[str, Callable[[JSONObject], JSONObject]] = field(default_factory=dict)
    #: the header the protocol's own API takes a key in ("x-api-key" for Messages); None:
    #: ``Authorization: Bearer``. Native mode sends the upstream's key there.
    key_header: str | None = None
    #: native mode: what the repairer will read of the request (its tools), checked before
    #: the request is sent; raises ClientRequestError for a 400
    check_native: Callable[[JSONObject], None] = lambda body: None

    @property
    def translates(self) -> bool:
        """It has a translate mode, so an upstream's settings pick its mode (translate or
        native); Chat Completions is only ever repaired in place."""
        return self.to_chat is not None
