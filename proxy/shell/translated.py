"""Answers to clients of the Responses and Messages APIs: translated from a chat upstream, or
the upstream's own endpoint repaired in place.

The core decides and rewrites (proxy/core/policy.py, proxy/core/bridge.py,
proxy/core/protocols/); this module moves bytes, as proxy/shell/handlers.py does for chat.
Whatever goes wrong before the stream starts reaches the client in its own protocol's error
shape (``ClientProtocol.error_body``), with the upstream's status where it had one.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from time import perf_counter
from typing import Any

import orjson
from aiohttp import ClientResponse, hdrs, web

from proxy.core.bridge import ChatBridge, translate_whole
from proxy.core.errors import ClientRequestError
from proxy.core.policy import Plan
from proxy.core.protocols.base import ChatRequest, ClientProtocol, Encoder, NativeStream
from proxy.core.protocols.chat.decode import completion_events
from proxy.core.protocols.chat.normalize import (
    RequestInfo,
    StreamNormalizer,
    normalize_completion,
)
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.protocols.responses.context import ToolRef
from proxy.core.protocols.responses.native.tools import NamesBack, names_back
from proxy.shell.app_state import REQUEST_ID, ProxyState, UpstreamConfig
from proxy.shell.bodies import media_type, read_capped, upstream_error_message
from proxy.shell.exchange import EXCHANGE, Exchange
from proxy.shell.headers import end_to_end
from proxy.shell.random_ids import new_id_factory
from proxy.shell.relay import relay

log = logging.getLogger("toolcall_proxy")

_SSE = "text/event-stream"
_JSON = "application/json"


def translate_request(plan: Plan, payload: object) -> ChatRequest:
    """The client's request as the chat request to send (a 400 when it cannot be)."""
    protocol = plan.protocol
    assert protocol is not None
    if not isinstance(payload, dict):
        raise ClientRequestError("the request body must be a JSON object")
    chat = protocol.to_chat(payload)
    if chat.body.get("stream") is True:
        # Usage reaches the client's protocol only when the chat upstream is asked for it.
        chat.body["stream_options"] = {"include_usage": True}
    for name in chat.dropped:
        log.debug("%s request: dropped %s (a chat upstream cannot take it)", protocol.name, name)
    return chat


def local_answer(plan: Plan, payload: object) -> web.Response:
    """What translate mode answers itself (count_tokens)."""
    assert plan.local is not None
    if not isinstance(payload, dict):
        raise ClientRequestError("the request body must be a JSON object")
    return web.Response(body=orjson.dumps(plan.local(payload)), content_type=_JSON)


async def respond_translated(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    chat: ChatRequest,
    resp: ClientResponse,
) -> web.StreamResponse:
    protocol = plan.protocol
    assert protocol is not None
    assert upstream.normalize is not None
    exchange = request[EXCHANGE]
    exchange.meter.upstream_headers_at = perf_counter()
    limit = state.settings.limits.max_response_body_bytes
    idle = state.settings.timeouts.idle
    kind = media_type(resp)
    new_id = new_id_factory()
    if resp.status != 200 or hdrs.CONTENT_ENCODING in resp.headers or kind not in (_SSE, _JSON):
        body, _ = await _read_whole(exchange, resp, limit, idle)
        if resp.status >= 400:
            status, message = resp.status, upstream_error_message(body, resp.status)
        else:
            status = 502
            message = (
                f"the upstream answered {resp.status} {kind or '(no type)'}, not a chat completion"
            )
        exchange.completion_rewritten(status, Counter())
        return _error(request, protocol, status, message)
    info = RequestInfo.from_body(chat.body)
    if kind == _JSON:
        body, complete = await _read_whole(exchange, resp, limit, idle)
        fixed, repairs = normalize_completion(body, upstream.normalize, info, new_id=new_id)
        events = completion_events(fixed) if complete else None
        if events is None:
            exchange.completion_rewritten(502, repairs)
            return _error(request, protocol, 502, "the upstream's answer is not a chat completion")
        encoder = protocol.encoder(chat.context, new_id, False)
        _feed_all(encoder, events)
        exchange.completion_rewritten(200, repairs)
        return _json(request, encoder.response())
    normalizer = StreamNormalizer(upstream.normalize, info, new_id=new_id)
    if not chat.body.get("stream"):  # the client asked for one object; the upstream streamed
        body, complete = await _read_whole(exchange, resp, limit, idle)
        whole = translate_whole(
            ChatSSEStream(normalizer),
            protocol.encoder(chat.context, new_id, False),
            body,
            complete=complete,
        )
        if whole.answer is None:
            exchange.completion_rewritten(502, normalizer.repairs)
            return _error(request, protocol, 502, whole.error)
        exchange.completion_rewritten(200, normalizer.repairs)
        return _json(request, whole.answer)
    bridge = ChatBridge(ChatSSEStream(normalizer), protocol.encoder(chat.context, new_id, True))
    response = await _start_stream(request, resp)
    exchange.response_started(200, streaming=True, repair_source=normalizer)
    return await relay(
        request, state, upstream, resp, response, transform=bridge, repairs=normalizer.repairs
    )


async def respond_native(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    payload: object,
    resp: ClientResponse,
    names: Mapping[str, ToolRef],
) -> web.StreamResponse:
    """The upstream's own endpoint: a 200 stream or body repaired in the protocol, anything
    else passed through as it came. ``names``: the tools the request sent under other names
    (native_tools.py), named back in the stream."""
    protocol = plan.protocol
    assert protocol is not None
    # native mode is only configured for an upstream that normalizes (settings.py); markup in
    # the server's own text is recovered with the dialects the upstream enables
    options = upstream.normalize
    assert options is not None
    exchange = request[EXCHANGE]
    exchange.meter.upstream_headers_at = perf_counter()
    kind = media_type(resp)
    rewritable = resp.status == 200 and hdrs.CONTENT_ENCODING not in resp.headers
    if rewritable and kind == _JSON:
        body, complete = await read_capped(
            resp, state.settings.limits.max_response_body_bytes, idle=state.settings.timeouts.idle
        )
        if complete:
            exchange.meter.received(body)
            fixed, repairs = protocol.native_completion(body=body, request=payload, options=options)
            fixed = names_back(fixed, names)  # as NamesBack does for a stream
            exchange.completion_rewritten(resp.status, repairs)
            exchange.meter.sending(fixed)
            answer = web.Response(status=resp.status, reason=resp.reason, body=fixed)
            answer.headers.extend(end_to_end(resp.headers, drop=(hdrs.CONTENT_LENGTH,)))
            answer.headers["X-Request-Id"] = request[REQUEST_ID]
            return answer
        return await _passthrough(request, state, upstream, resp, head=body)
    if rewritable and kind == _SSE:
        stream: NativeStream = protocol.native(
            new_id=new_id_factory(), request=payload, options=options
        )
        if names:
            stream = NamesBack(stream, names, max_event_bytes=options.max_event_bytes)
        response = await _start_stream(request, resp)
        exchange.response_started(200, streaming=True, repair_source=stream)
        return await relay(
            request, state, upstream, resp, response, transform=stream, repairs=stream.repairs
        )
    return await _passthrough(request, state, upstream, resp, head=b"")


async def _passthrough(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    resp: ClientResponse,
    *,
    head: bytes,
) -> web.StreamResponse:
    exchange = request[EXCHANGE]
    response = web.StreamResponse(status=resp.status, reason=resp.reason)
    response.headers.extend(end_to_end(resp.headers))
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    await response.prepare(request)
    exchange.response_started(resp.status, streaming=media_type(resp) == _SSE, repair_source=None)
    if head:
        exchange.meter.received(head)
        exchange.meter.sending(head)
        await response.write(head)
    return await relay(request, state, upstream, resp, response, transform=None, repairs=None)


async def _start_stream(request: web.Request, resp: ClientResponse) -> web.StreamResponse:
    """The head of an event stream the proxy writes: the upstream's headers but its length
    and type, which no longer hold."""
    response = web.StreamResponse(status=200)
    response.headers.extend(end_to_end(resp.headers, drop=(hdrs.CONTENT_LENGTH, hdrs.CONTENT_TYPE)))
    response.headers[hdrs.CONTENT_TYPE] = _SSE
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    response.headers["X-Accel-Buffering"] = "no"
    await response.prepare(request)
    return response


async def _read_whole(
    exchange: Exchange, resp: ClientResponse, limit: int, idle: float
) -> tuple[bytes, bool]:
    """The upstream's body read whole (``read_capped``), counted for the access line."""
    body, complete = await read_capped(resp, limit, idle=idle)
    exchange.meter.received(body)
    return body, complete


def _json(request: web.Request, answer: object) -> web.Response:
    return _answer(request, 200, orjson.dumps(answer))


def _error(
    request: web.Request, protocol: ClientProtocol, status: int, message: str
) -> web.Response:
    return _answer(request, status, protocol.error_body(status, message))


def _answer(request: web.Request, status: int, body: bytes) -> web.Response:
    """A whole JSON answer of the proxy's own making, counted for the access line."""
    request[EXCHANGE].meter.sending(body)
    response = web.Response(status=status, body=body, content_type=_JSON)
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    return response


def _feed_all(encoder: Encoder, events: list[Any]) -> None:
    for event in events:
        encoder.feed(event)
