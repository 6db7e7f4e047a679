"""The core's one face for the answers the shell rewrites, asked by plan (proxy/core/policy.py).

The shell moves bytes and keeps time; what a rewritten answer is made of, it asks here:

* ``chat_request(plan, payload)``: translate mode's request, as the chat completion to send;
* ``request_facts(plan, payload)``: what the repair of the answer reads of the client's
  request, taken before the request goes out (the rest of the parsed body can then go);
* ``rewrite_stream(plan, ...)``: the transform the pump drives over a rewritten stream, and
  its count of repairs;
* ``repair_whole(plan, ...)``: a whole body of the client's own protocol, repaired in place
  (a chat completion, or a native Responses or Messages body);
* ``translate_whole(plan, ...)``: translate mode's whole answer, as the client's protocol's
  object or its error.

Every entry takes the upstream's ``UpstreamOptions`` and the response's id factory by keyword,
and the protocols come from the registry (proxy/core/protocols/registry.py), so no protocol's
classes are known outside the core.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from proxy.core import bridge, parse_failure
from proxy.core.errors import ClientRequestError
from proxy.core.events import Usage
from proxy.core.jsonvalues import dumps, loads
from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.policy import Mode, Plan
from proxy.core.protocols import chat
from proxy.core.protocols.base import ChatRequest, ClientProtocol
from proxy.core.protocols.chat.decode import completion_events
from proxy.core.protocols.responses.context import ToolRef
from proxy.core.protocols.responses.native.tools import NamesBack, names_back
from proxy.core.repairs import Repair
from proxy.core.usage import Tokens, UsageSeen, body_tokens, chat_tokens

__all__ = [
    "ChatRequest",
    "Renames",
    "Rewrite",
    "StreamTransform",
    "Tokens",
    "UsageSeen",
    "WholeAnswer",
    "chat_request",
    "error_body",
    "recover_parse_failure",
    "repair_whole",
    "request_facts",
    "rewrite_stream",
    "translate_whole",
    "whole_tokens",
]


#: native Responses: the names its request repair gave the client's tools -> those tools
#: (proxy/core/request_repairs/native.py), named back in the stream
Renames = Mapping[str, ToolRef]


class StreamTransform(Protocol):
    """Upstream reads in, client bytes out; ``over``: the client's response has ended (its
    failure event written), so no more of the upstream's body is read."""

    def feed(self, chunk: bytes) -> list[bytes]: ...

    def close(self, *, complete: bool) -> list[bytes]: ...

    @property
    def over(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A rewritten stream: what the pump drives, the repairs it counts as it goes, and the
    usage the upstream reported (read at the end: ``usage.tokens()``)."""

    transform: StreamTransform
    repairs: Counter[str]
    usage: UsageSeen


@dataclass(frozen=True, slots=True)
class WholeAnswer:
    """Translate mode's whole answer: the status and the body in the client's protocol."""

    status: int
    body: bytes
    repairs: Counter[str]
    tokens: Tokens | None = None  # the usage the chat upstream reported


def _protocol(plan: Plan) -> ClientProtocol:
    protocol = plan.protocol
    if protocol is None:
        raise AssertionError(f"a {plan.mode.value} plan names no protocol")
    return protocol


def chat_request(plan: Plan, payload: object) -> ChatRequest:
    """The client's request as the chat request to send (a 400 when it cannot be)."""
    to_chat = _protocol(plan).to_chat
    assert to_chat is not None, "only a protocol with a translate mode is translated"
    if not isinstance(payload, dict):
        raise ClientRequestError("the request body must be a JSON object")
    request = to_chat(payload)
    if request.body.get("stream") is True:
        # Usage reaches the client's protocol only when the chat upstream is asked for it.
        request.body["stream_options"] = {"include_usage": True}
    return request


def request_facts(plan: Plan, payload: object) -> object:
    """What the repair of a CHAT or NATIVE answer reads of the client's request."""
    return _protocol(plan).request_facts(payload)


def rewrite_stream(
    plan: Plan,
    *,
    options: UpstreamOptions,
    request: object,
    new_id: Callable[[], str],
    names: Renames | None = None,
) -> Rewrite:
    """The stream of a CHAT, NATIVE or TRANSLATE plan, rewritten. ``request``: the
    ``request_facts`` (CHAT, NATIVE) or the ``chat_request`` (TRANSLATE); ``names``, native
    Responses only: the tools its request repair renamed, named back in the stream."""
    protocol = _protocol(plan)
    if plan.mode is Mode.TRANSLATE:
        assert isinstance(request, ChatRequest)
        return _translating(protocol, request, options=options, new_id=new_id)
    native = protocol.native(new_id=new_id, request=request, options=options)
    if names:
        native = NamesBack(native, names, max_event_bytes=options.max_event_bytes)
    return Rewrite(native, native.repairs, native.usage)


def _translating(
    protocol: ClientProtocol,
    request: ChatRequest,
    *,
    options: UpstreamOptions,
    new_id: Callable[[], str],
) -> Rewrite:
    """A chat stream repaired, its pieces as ``protocol``'s events (translate mode)."""
    assert protocol.encoder is not None
    stream = chat.native(
        new_id=new_id, request=RequestInfo.from_body(request.body), options=options
    )
    encoder = protocol.encoder(context=request.context, new_id=new_id, stream=True)
    return Rewrite(bridge.ChatBridge(stream, encoder), stream.repairs, stream.usage)


def whole_tokens(plan: Plan, body: bytes) -> Tokens | None:
    """The tokens a CHAT or NATIVE plan's whole upstream body reports (proxy/core/usage.py)."""
    return body_tokens(_protocol(plan).name, body)


def repair_whole(
    plan: Plan,
    *,
    body: bytes,
    options: UpstreamOptions,
    request: object,
    new_id: Callable[[], str],
    names: Renames | None = None,
) -> tuple[bytes, Counter[str]]:
    """A CHAT or NATIVE plan's whole body, repaired in the client's protocol, and the
    repairs it took; ``request``: the ``request_facts``; ``names``, native Responses only:
    the tools its request repair renamed, named back as in a stream."""
    fixed, repairs = _protocol(plan).native_completion(
        body=body, request=request, options=options, new_id=new_id
    )
    return (names_back(fixed, names) if names else fixed), repairs


def translate_whole(
    plan: Plan,
    *,
    request: ChatRequest,
    body: bytes,
    complete: bool,
    streamed: bool,
    options: UpstreamOptions,
    new_id: Callable[[], str],
) -> WholeAnswer:
    """A TRANSLATE plan's whole answer for a client that asked for one object: ``body`` is
    the chat upstream's 200 body (``complete``: it ended cleanly), a chat completion or, when
    ``streamed``, an event stream the upstream sent anyway."""
    protocol = _protocol(plan)
    assert protocol.encoder is not None
    encoder = protocol.encoder(context=request.context, new_id=new_id, stream=False)
    info = RequestInfo.from_body(request.body)
    if streamed:
        stream = chat.native(new_id=new_id, request=info, options=options)
        whole = bridge.translate_whole(stream, encoder, body, complete=complete)
        tokens = stream.usage.tokens()
        if whole.answer is None:
            return WholeAnswer(502, error_body(plan, 502, whole.error), stream.repairs, tokens)
        return WholeAnswer(200, dumps(whole.answer), stream.repairs, tokens)
    fixed, repairs = chat.native_completion(body=body, request=info, options=options, new_id=new_id)
    events = completion_events(fixed) if complete else None
    # the completion's usage, as its events carry it (read once, for the encoder)
    usage = next((e.raw for e in events or () if isinstance(e, Usage)), None)
    tokens = chat_tokens(usage) if usage else None
    if events is None:
        message = "the upstream's answer is not a chat completion"
        return WholeAnswer(502, error_body(plan, 502, message), repairs, tokens)
    for event in events:
        encoder.feed(event)
    return WholeAnswer(200, dumps(encoder.response()), repairs, tokens)


def recover_parse_failure(
    plan: Plan,
    *,
    status: int,
    body: bytes,
    options: UpstreamOptions,
    request: object,
    streamed: bool,
    new_id: Callable[[], str],
) -> WholeAnswer | None:
    """A CHAT, TRANSLATE or NATIVE plan's error before the stream (``status``, ``body``) that
    is llama-server's parser failure holding the model's whole calls (core/parse_failure.py):
    the answer those calls make, in the client's protocol, an event stream when ``streamed``,
    repaired or translated as the upstream's own would be; None: the error goes on.
    ``request``: the ``request_facts`` (CHAT, NATIVE) or the ``chat_request`` (TRANSLATE).
    A native client's answer is written as translate mode writes one (its request made the
    chat request it would have been): the proxy has no native answer to repair."""
    if status < 500 or not options.recover_parse_failures:
        return None
    if plan.mode is Mode.NATIVE:
        request = _as_chat(plan, request)
    if plan.mode is not Mode.CHAT and isinstance(request, ChatRequest):
        tools = parse_failure.tools_of(request.body)
    elif plan.mode is Mode.CHAT and isinstance(request, RequestInfo):
        tools = list(request.tools)
    else:
        return None
    recovered = parse_failure.recover(parse_failure.error_message(loads(body)), tools)
    if recovered is None:
        return None
    if streamed:
        data = parse_failure.chat_stream(recovered, model="", new_id=new_id)
        if isinstance(request, ChatRequest):
            rewrite = _translating(_protocol(plan), request, options=options, new_id=new_id)
        else:
            rewrite = rewrite_stream(plan, options=options, request=request, new_id=new_id)
        out = [*rewrite.transform.feed(data), *rewrite.transform.close(complete=True)]
        answer = WholeAnswer(200, b"".join(out), rewrite.repairs)
    else:
        completion = parse_failure.chat_completion(recovered, model="", new_id=new_id)
        if isinstance(request, ChatRequest):
            answer = translate_whole(
                plan,
                request=request,
                body=completion,
                complete=True,
                streamed=False,
                options=options,
                new_id=new_id,
            )
        else:
            fixed, repairs = repair_whole(
                plan, body=completion, options=options, request=request, new_id=new_id
            )
            answer = WholeAnswer(200, fixed, repairs)
    answer.repairs[Repair.PARSE_FAILURE_RECOVERED] += 1
    return answer


def _as_chat(plan: Plan, request: object) -> ChatRequest | None:
    """A NATIVE plan's client request as its translate mode's chat request (None: its
    protocol has no translate mode, or the request would not translate)."""
    if _protocol(plan).to_chat is None or not isinstance(request, dict):
        return None
    try:
        return chat_request(plan, request)
    except ClientRequestError:
        return None


def error_body(plan: Plan, status: int, message: str) -> bytes:
    """An error of a TRANSLATE or LOCAL plan, in the client's protocol's shape."""
    shape = _protocol(plan).error_body
    assert shape is not None, "a protocol with a translate mode has its own error shape"
    return shape(status, message)
