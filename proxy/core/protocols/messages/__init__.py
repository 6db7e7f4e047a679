"""The Anthropic Messages API (``POST /v1/messages``) as a client protocol.

translate: request.py maps the request to Chat Completions, encode.py writes the neutral
events of the repaired chat stream as Messages events. native: native/stream.py repairs a
server's own Messages stream in place (native/whole.py its non-streamed Message). errors.py is the
error shape, count.py the ``count_tokens`` answer.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from proxy.core.jsonvalues import JSONObject
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.base import ChatRequest, ClientProtocol
from proxy.core.protocols.messages.count import count_tokens
from proxy.core.protocols.messages.encode import MessagesEncoder
from proxy.core.protocols.messages.errors import error_body
from proxy.core.protocols.messages.native.stream import NativeMessages
from proxy.core.protocols.messages.native.whole import repair_message
from proxy.core.protocols.messages.request import (
    MessagesContext,
    convert_tools,
    translate_request,
)


def to_chat(body: JSONObject) -> ChatRequest:
    translated = translate_request(body)
    return ChatRequest(translated.body, translated.context, translated.dropped)


def encoder(*, context: object, new_id: Callable[[], str], stream: bool) -> MessagesEncoder:
    assert isinstance(context, MessagesContext)
    return MessagesEncoder(context, new_id, stream=stream)


def check_native(body: JSONObject) -> None:
    """The tools the native repairer reads (for the markup dialects): a 400 before the
    upstream generates anything, not one after."""
    convert_tools(body.get("tools"))


def native(
    *, new_id: Callable[[], str], request: object, options: UpstreamOptions
) -> NativeMessages:
    return NativeMessages(new_id, request, options=options)


def native_completion(
    *, body: bytes, request: object, options: UpstreamOptions, new_id: Callable[[], str]
) -> tuple[bytes, Counter[str]]:
    return repair_message(body, request, new_id=new_id, options=options)


PROTOCOL = ClientProtocol(
    name="messages",
    path_suffix="/messages",
    to_chat=to_chat,
    encoder=encoder,
    error_body=error_body,
    native=native,
    native_completion=native_completion,
    local={"/count_tokens": count_tokens},
    key_header="x-api-key",
    check_native=check_native,
)
