"""The upstream's answer to the client, for every plan (proxy/core/policy.py): passed
through, repaired in the client's own protocol (chat, native), or translated.

The core makes what a rewritten answer is (proxy/core/streams.py); this module moves bytes and
sets heads. Whatever goes wrong in translate mode before the stream starts reaches the client
in its own protocol's error shape, with the upstream's status where it had one.
"""

from __future__ import annotations

import logging
from collections import Counter
from time import perf_counter

import orjson
from aiohttp import ClientResponse, hdrs, web

from proxy.core import streams
from proxy.core.errors import ClientRequestError
from proxy.core.policy import Mode, Plan, rewrites_response
from proxy.shell.app_state import ProxyState, UpstreamConfig
from proxy.shell.exchange import EXCHANGE, Exchange
from proxy.shell.headers import end_to_end
from proxy.shell.random_ids import new_id_factory
from proxy.shell.relay import relay
from proxy.shell.upstream_body import media_type, read_capped, upstream_error_message

log = logging.getLogger("toolcall_proxy")

_SSE = "text/event-stream"
_JSON = "application/json"
#: the plans whose upstream's 5xx may be llama-server's parser failure with the model's calls
_RECOVERS = (Mode.CHAT, Mode.NATIVE)


async def respond(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    resp: ClientResponse,
    *,
    facts: object = None,
    chat: streams.ChatRequest | None = None,
    names: streams.Renames | None = None,
    streamed: bool = False,
) -> web.StreamResponse:
    """``resp`` to the client as ``plan`` says. ``facts``: what the repair of a CHAT or
    NATIVE answer reads of the request (``streams.request_facts``); ``chat``: the request a
    TRANSLATE plan sent; ``names``: the tools a native request was sent under other names;
    ``streamed``: the client asked for a stream."""
    request[EXCHANGE].meter.upstream_headers_at = perf_counter()
    if plan.mode is Mode.TRANSLATE:
        assert chat is not None
        return await _translated(request, state, upstream, plan, chat, resp)
    if plan.mode in _RECOVERS and resp.status >= 500 and media_type(resp) == _JSON:
        return await _chat_error(request, state, upstream, plan, facts, resp, streamed=streamed)
    return await _in_place(request, state, upstream, plan, facts, resp, names)


def local_answer(plan: Plan, payload: object) -> web.Response:
    """What translate mode answers itself (count_tokens)."""
    assert plan.local is not None
    if not isinstance(payload, dict):
        raise ClientRequestError("the request body must be a JSON object")
    return web.Response(body=orjson.dumps(plan.local(payload)), content_type=_JSON)


async def _in_place(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    facts: object,
    resp: ClientResponse,
    names: streams.Renames | None,
) -> web.StreamResponse:
    """An answer in the client's own protocol (CHAT, NATIVE, PASSTHROUGH): a 200 event stream
    or JSON body of a plan that rewrites (``rewrites_response``) is repaired in place, anything
    else passes through as it came. ``facts``: what the repair reads of the request."""
    exchange = request[EXCHANGE]
    kind = media_type(resp)
    rewrite = rewrites_response(plan, resp.status, kind, hdrs.CONTENT_ENCODING in resp.headers)
    head = b""
    if rewrite and kind == _JSON:
        body, complete = await read_capped(
            resp, state.settings.limits.max_response_body_bytes, idle=state.settings.timeouts.idle
        )
        if complete:
            return _repaired_whole(request, upstream, plan, facts, resp, body, names)
        head = body  # too large to hold, or cut off: what came goes out first, then the rest
    if rewrite and kind == _SSE:
        # a plan that rewrites is made only for an upstream that normalizes (settings.py)
        assert upstream.normalize is not None
        rewriting = streams.rewrite_stream(
            plan, options=upstream.normalize, request=facts, new_id=new_id_factory(), names=names
        )
        if plan.mode is Mode.NATIVE:  # the head of a stream the proxy writes, as translated
            response = await _start_stream(request, resp)
        else:
            response = await _head(request, resp, drop=(hdrs.CONTENT_LENGTH,))
        exchange.response_started(resp.status, streaming=True, repair_source=rewriting)
        exchange.usage = rewriting.usage
        return await relay(
            request,
            state,
            upstream,
            resp,
            response,
            transform=rewriting.transform,
            repairs=rewriting.repairs,
        )
    return await _passthrough(request, state, upstream, resp, head=head)


async def _chat_error(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    facts: object,
    resp: ClientResponse,
    *,
    streamed: bool,
) -> web.StreamResponse:
    """A chat or native upstream's 5xx: llama-server's parser failure holding the model's
    whole calls is answered with them (``streams.recover_parse_failure``); any other passes
    as it came."""
    exchange = request[EXCHANGE]
    limits = state.settings.limits
    body, complete = await read_capped(
        resp, limits.max_response_body_bytes, idle=state.settings.timeouts.idle
    )
    answer = None
    if complete and upstream.normalize is not None:
        answer = streams.recover_parse_failure(
            plan,
            status=resp.status,
            body=body,
            options=upstream.normalize,
            request=facts,
            streamed=streamed,
            new_id=new_id_factory(),
        )
    if answer is None:
        return await _passthrough(request, state, upstream, resp, head=body)
    exchange.meter.received(body)
    return _recovered(request, answer, streamed=streamed)


def _recovered(
    request: web.Request, answer: streams.WholeAnswer, *, streamed: bool
) -> web.Response:
    """The answer a parser failure's calls made, whole (a stream's events all at once)."""
    request[EXCHANGE].completion_rewritten(answer.status, answer.repairs)
    request[EXCHANGE].meter.sending(answer.body)
    kind = _SSE if streamed and answer.status == 200 else _JSON
    return web.Response(status=answer.status, body=answer.body, content_type=kind)


def _repaired_whole(
    request: web.Request,
    upstream: UpstreamConfig,
    plan: Plan,
    facts: object,
    resp: ClientResponse,
    body: bytes,
    names: streams.Renames | None,
) -> web.Response:
    """A whole body of the client's own protocol (a chat completion, a native Response or
    Message), repaired, its renamed tools named back as in a stream."""
    assert upstream.normalize is not None
    exchange = request[EXCHANGE]
    exchange.meter.received(body)
    fixed, repairs = streams.repair_whole(
        plan,
        body=body,
        options=upstream.normalize,
        request=facts,
        new_id=new_id_factory(),
        names=names,
    )
    exchange.completion_rewritten(resp.status, repairs)
    exchange.tokens = streams.whole_tokens(plan, body)
    exchange.meter.sending(fixed)
    if repairs:
        log.debug("upstream %s completion repairs: %s", upstream.route.name, dict(repairs))
    response = web.Response(status=resp.status, reason=resp.reason, body=fixed)
    end_to_end(resp.headers, drop=(hdrs.CONTENT_LENGTH,), into=response.headers)
    return response


async def _translated(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    chat: streams.ChatRequest,
    resp: ClientResponse,
) -> web.StreamResponse:
    options = upstream.normalize
    assert options is not None
    exchange = request[EXCHANGE]
    limit = state.settings.limits.max_response_body_bytes
    idle = state.settings.timeouts.idle
    kind = media_type(resp)
    new_id = new_id_factory()
    if resp.status != 200 or hdrs.CONTENT_ENCODING in resp.headers or kind not in (_SSE, _JSON):
        body, complete = await _read_whole(exchange, resp, limit, idle)
        streamed = chat.body.get("stream") is True
        recovered = None
        if complete and hdrs.CONTENT_ENCODING not in resp.headers:
            recovered = streams.recover_parse_failure(
                plan,
                status=resp.status,
                body=body,
                options=options,
                request=chat,
                streamed=streamed,
                new_id=new_id,
            )
        if recovered is not None:
            return _recovered(request, recovered, streamed=streamed)
        if resp.status >= 400:
            status, message = resp.status, upstream_error_message(body, resp.status)
        else:
            status = 502
            message = (
                f"the upstream answered {resp.status} {kind or '(no type)'}, not a chat completion"
            )
        exchange.completion_rewritten(status, Counter())
        return _answer(request, status, streams.error_body(plan, status, message))
    if kind == _JSON or not chat.body.get("stream"):
        # one object: the upstream's completion, or the stream it sent anyway read whole
        body, complete = await _read_whole(exchange, resp, limit, idle)
        whole = streams.translate_whole(
            plan,
            request=chat,
            body=body,
            complete=complete,
            streamed=kind == _SSE,
            options=options,
            new_id=new_id,
        )
        exchange.completion_rewritten(whole.status, whole.repairs)
        exchange.tokens = whole.tokens
        return _answer(request, whole.status, whole.body)
    rewrite = streams.rewrite_stream(plan, options=options, request=chat, new_id=new_id)
    response = await _start_stream(request, resp)
    exchange.response_started(200, streaming=True, repair_source=rewrite)
    exchange.usage = rewrite.usage
    return await relay(
        request,
        state,
        upstream,
        resp,
        response,
        transform=rewrite.transform,
        repairs=rewrite.repairs,
    )


async def _passthrough(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    resp: ClientResponse,
    *,
    head: bytes,
) -> web.StreamResponse:
    """The upstream's answer as it came; ``head``: what of its body was read already."""
    exchange = request[EXCHANGE]
    response = await _head(request, resp, drop=())
    exchange.response_started(resp.status, streaming=media_type(resp) == _SSE, repair_source=None)
    if head:
        exchange.meter.received(head)
        exchange.meter.sending(head)
        await response.write(head)
    return await relay(request, state, upstream, resp, response, transform=None, repairs=None)


async def _head(
    request: web.Request, resp: ClientResponse, *, drop: tuple[str, ...]
) -> web.StreamResponse:
    """The upstream's status and headers (but ``drop``) as the head of the answer, and no
    buffering on the way for an event stream."""
    response = web.StreamResponse(status=resp.status, reason=resp.reason)
    end_to_end(resp.headers, drop=drop, into=response.headers)
    if media_type(resp) == _SSE:
        response.headers["X-Accel-Buffering"] = "no"
    await response.prepare(request)
    return response


async def _start_stream(request: web.Request, resp: ClientResponse) -> web.StreamResponse:
    """The head of an event stream the proxy writes: the upstream's headers but its length
    and type, which no longer hold."""
    response = web.StreamResponse(status=200)
    end_to_end(resp.headers, drop=(hdrs.CONTENT_LENGTH, hdrs.CONTENT_TYPE), into=response.headers)
    response.headers[hdrs.CONTENT_TYPE] = _SSE
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


def _answer(request: web.Request, status: int, body: bytes) -> web.Response:
    """A whole JSON answer of the proxy's own making, counted for the access line."""
    request[EXCHANGE].meter.sending(body)
    return web.Response(status=status, body=body, content_type=_JSON)
