"""What a client protocol beside Chat Completions gives the shell: the interfaces.

A protocol is a decoder and an encoder: its package builds one :class:`ClientProtocol`, and
proxy/core/protocols/registry.py names them all, so the shell looks a protocol up there and
knows no protocol's shapes itself.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from proxy.core.events import StreamEvent
from proxy.core.jsonvalues import JSONObject
from proxy.core.options import UpstreamOptions


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
    """A server's own stream of the protocol, repaired in place."""

    repairs: Counter[str]
    held_bytes: int  #: the upstream's bytes it holds back now, which max_held_bytes bounds

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
        self, *, body: bytes, request: object, options: UpstreamOptions
    ) -> tuple[bytes, Counter[str]]: ...


@dataclass(frozen=True, slots=True)
class ClientProtocol:
    name: str  #: the per-upstream settings key that picks the mode ("responses", "messages")
    path_suffix: str  #: the client's request path ends with it ("/responses")
    to_chat: Callable[[JSONObject], ChatRequest]  #: raises ClientRequestError for a 400
    encoder: Callable[[object, Callable[[], str], bool], Encoder]  #: (context, new_id, stream)
    error_body: Callable[[int, str], bytes]  #: (status, message) -> the protocol's error JSON
    native: NativeStreamFactory
    native_completion: NativeCompletion
    #: path suffix -> an answer the proxy gives itself in translate mode (count_tokens)
    local: dict[str, Callable[[JSONObject], JSONObject]] = field(default_factory=dict)
    #: native mode: what the repairer will read of the request (its tools), checked before
    #: the request is sent; raises ClientRequestError for a 400
    check_native: Callable[[JSONObject], None] = lambda body: None
