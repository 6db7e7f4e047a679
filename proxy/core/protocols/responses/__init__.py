"""The OpenAI Responses API (``/v1/responses``): translated over a chat upstream, or a server's
own stream repaired in place. docs/responses.md has the mapping; ``PROTOCOL`` is what the shell
gets (proxy/core/protocols/base.py), named in proxy/core/protocols/registry.py."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.base import ChatRequest, ClientProtocol
from proxy.core.protocols.responses.context import ResponsesContext
from proxy.core.protocols.responses.encode import ResponsesEncoder
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.protocols.responses.native.whole import repair_completion
from proxy.core.protocols.responses.request import translate_request
from proxy.core.protocols.responses.tools import convert_tools

_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


def to_chat(body: JSONObject) -> ChatRequest:
    chat, context, dropped = translate_request(body)
    return ChatRequest(chat, context, dropped)


def encoder(*, context: object, new_id: Callable[[], str], stream: bool) -> ResponsesEncoder:
    ctx = context if isinstance(context, ResponsesContext) else ResponsesContext()
    return ResponsesEncoder(ctx, new_id, stream=stream)


def error_body(status: int, message: str) -> bytes:
    """OpenAI's error shape; the type follows the status as api.openai.com's does."""
    kind = _ERROR_TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return orjson.dumps({"error": {"message": message, "type": kind, "param": None, "code": None}})


def check_native(body: JSONObject) -> None:
    """The tools the native repairer reads (for the markup dialects), as translate mode
    would read them: a 400 before the upstream generates anything, not a failure after."""
    convert_tools(body.get("tools"))


def native(*, new_id: Callable[[], str], request: object, options: UpstreamOptions) -> NativeStream:
    return NativeStream(new_id, NativeRequest.from_body(request), options=options)


def native_completion(
    *, body: bytes, request: object, options: UpstreamOptions, new_id: Callable[[], str]
) -> tuple[bytes, Counter[str]]:
    # new_id: the calls a wrapper holds (issue 24 item 6) are items of the proxy's
    return repair_completion(body, NativeRequest.from_body(request), options=options, new_id=new_id)


PROTOCOL = ClientProtocol(
    name="responses",
    path_suffix="/responses",
    to_chat=to_chat,
    encoder=encoder,
    error_body=error_body,
    native=native,
    native_completion=native_completion,
    check_native=check_native,
)
