"""Which requests and responses the proxy rewrites, and how: a pure function of the request's
method and path, the upstream's settings, and the response's status and media type.

Four ways a request can go:

* ``PASSTHROUGH``: bytes both ways as they are (every path but the ones below, and everything
  to an upstream with ``normalize = false``).
* ``CHAT``: a chat completion; a 200 event stream or JSON body is repaired as chat.
* ``TRANSLATE``: a client of another protocol (``/v1/responses``, ``/v1/messages``) over a
  chat upstream: the request is translated to a chat completion sent to the chat path under
  the same prefix, and the answer back to the client's protocol.
* ``NATIVE``: the same client protocols sent to the upstream's own endpoint; a 200 stream or
  body is repaired in that protocol.

``LOCAL`` is what translate mode answers itself (the Messages API's ``count_tokens``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.base import ClientProtocol
from proxy.core.protocols.registry import CLIENT_PROTOCOLS

ProtocolMode = Literal["translate", "native"]
CHAT_SUFFIX: Final = "/chat/completions"


class Mode(Enum):
    PASSTHROUGH = "passthrough"
    CHAT = "chat"
    TRANSLATE = "translate"
    NATIVE = "native"
    LOCAL = "local"


@dataclass(frozen=True, slots=True)
class Plan:
    mode: Mode
    protocol: ClientProtocol | None = None
    #: TRANSLATE: the path (no query) the chat request goes to, under the client's prefix
    upstream_path: str | None = None
    local: Callable[[JSONObject], JSONObject] | None = None


PASSTHROUGH: Final = Plan(Mode.PASSTHROUGH)
CHAT: Final = Plan(Mode.CHAT)


def client_protocol(method: str, path: str) -> ClientProtocol | None:
    """The protocol a request speaks when it is not Chat Completions (for the shape of the
    proxy's own errors, whatever the upstream's mode)."""
    if method != "POST":
        return None
    for protocol in CLIENT_PROTOCOLS.values():
        if path.endswith(protocol.path_suffix) or any(
            path.endswith(protocol.path_suffix + suffix) for suffix in protocol.local
        ):
            return protocol
    return None


def plan_request(
    method: str, path: str, *, normalize: bool, modes: Mapping[str, ProtocolMode]
) -> Plan:
    """How a request to an upstream goes; ``modes`` maps a protocol's name to its mode."""
    if not normalize or method != "POST":
        return PASSTHROUGH
    if path.endswith(CHAT_SUFFIX):
        return CHAT
    protocol = client_protocol(method, path)
    if protocol is None:
        return PASSTHROUGH
    mode = modes.get(protocol.name, "translate")
    if path.endswith(protocol.path_suffix):
        if mode == "native":
            return Plan(Mode.NATIVE, protocol)
        prefix = path[: -len(protocol.path_suffix)]
        return Plan(Mode.TRANSLATE, protocol, upstream_path=prefix + CHAT_SUFFIX)
    if mode == "native":
        return Plan(Mode.PASSTHROUGH, protocol)
    local = next(fn for suffix, fn in protocol.local.items() if path.endswith(suffix))
    return Plan(Mode.LOCAL, protocol, local=local)


def rewrites_response(plan: Plan, status: int, media_type: str, encoded: bool) -> bool:
    """Whether a response is rewritten: a 200 event stream or JSON body, uncompressed."""
    if plan.mode in (Mode.PASSTHROUGH, Mode.LOCAL) or status != 200 or encoded:
        return False
    return media_type in ("text/event-stream", "application/json")
