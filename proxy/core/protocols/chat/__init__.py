"""Chat Completions: chunks in, repaired chunks out; ``stream: false`` bodies too.

``PROTOCOL`` is what the core's facade gets (proxy/core/protocols/base.py), named in
proxy/core/protocols/registry.py like the other protocols. Chat has no translate mode: it is
what the others translate to, and its stream and body are always repaired in place
(sse_stream.py, completion.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.base import ClientProtocol
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream

#: the chat path under a client's prefix; a translated request goes to it as well
PATH_SUFFIX = "/chat/completions"


def _facts(request: object) -> RequestInfo:
    return request if isinstance(request, RequestInfo) else RequestInfo.from_body(request)


def native(
    *, new_id: Callable[[], str], request: object, options: UpstreamOptions
) -> ChatSSEStream:
    return ChatSSEStream(StreamNormalizer(options, _facts(request), new_id=new_id))


def native_completion(
    *, body: bytes, request: object, options: UpstreamOptions, new_id: Callable[[], str]
) -> tuple[bytes, Counter[str]]:
    return normalize_completion(body, options, _facts(request), new_id=new_id)


PROTOCOL = ClientProtocol(
    name="chat",
    path_suffix=PATH_SUFFIX,
    native=native,
    native_completion=native_completion,
    request_facts=RequestInfo.from_body,
)
