"""Request handlers: route, forward, and choose between passthrough and rewriting.

A handler decides *whether* a response is rewritten (route, method, path, status, content
type); :mod:`proxy.shell.pump` moves the bytes. Errors raised before the response starts are
ProxyErrors, turned into OpenAI-shaped JSON by the error middleware.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import cache
from time import perf_counter
from typing import Any, Final, TypeVar

import orjson
from aiohttp import (
    ClientConnectionError,
    ClientError,
    ClientResponse,
    ClientResponseError,
    ClientTimeout,
    ConnectionTimeoutError,
    hdrs,
    web,
)
from multidict import CIMultiDict
from yarl import URL

from proxy.core import streams
from proxy.core.errors import ClientRequestError, NoRouteError, UpstreamError, UpstreamTimeout
from proxy.core.forwarding import Forwarding
from proxy.core.policy import Mode, Plan, plan_request, rewrites_response
from proxy.core.protocols.base import ChatRequest
from proxy.core.protocols.responses.context import ToolRef
from proxy.core.request_limits import check_depth, check_tools
from proxy.core.request_repairs.native import NATIVE_REQUEST_REPAIRS
from proxy.core.request_repairs.needs import TemplateNeeds
from proxy.core.request_repairs.repair import repair_request
from proxy.core.routing import Upstream, is_safe_path, upstream_url
from proxy.settings import Settings
from proxy.shell import keepalive
from proxy.shell.app_state import (
    REQUEST_ID,
    STATE,
    ProxyState,
    UpstreamConfig,
)
from proxy.shell.bodies import media_type, read_capped
from proxy.shell.body import ForwardedBody, body_model, read_body
from proxy.shell.credentials import apply_credentials, apply_listing_credentials
from proxy.shell.exchange import EXCHANGE
from proxy.shell.forwarded import set_forwarded
from proxy.shell.headers import end_to_end
from proxy.shell.metrics import METRICS
from proxy.shell.random_ids import new_id_factory
from proxy.shell.relay import relay
from proxy.shell.translated import (
    local_answer,
    respond_native,
    respond_translated,
    translate_request,
)

log = logging.getLogger("toolcall_proxy")

# The proxy's own endpoints live under a prefix that no LLM server uses, so that an upstream's
# /health and /metrics stay reachable through the proxy.
OWN_PREFIX: Final = "/-/"


def check_target(request: web.Request) -> None:
    """Refuse a target that is not a path, or a path that climbs (400)."""
    if not request.raw_path.startswith("/"):
        # An absolute-form target (GET http://host/ HTTP/1.1) asks for a forward proxy.
        raise ClientRequestError("the request target must be a path; this is not a forward proxy")
    if not is_safe_path(request.raw_path):
        raise ClientRequestError("the request path has dot segments")


async def handle_proxy(request: web.Request) -> web.StreamResponse:
    state = request.app[STATE]
    check_target(request)
    if request.path.startswith(OWN_PREFIX):
        # not one of the proxy's endpoints, and never an upstream's: the prefix is the proxy's
        raise NoRouteError(
            f"no such endpoint: the proxy's own are {OWN_PREFIX}health, {OWN_PREFIX}ready"
            f" and {OWN_PREFIX}metrics (GET)"
        )
    if request.method == "GET" and request.path == "/v1/models":
        return await handle_models(request)
    body, payload = await read_body(
        request,
        limit=state.settings.limits.max_request_body_bytes,
        time_limit=state.settings.timeouts.request_body,
    )
    model = body_model(payload)
    exchange = request[EXCHANGE]
    exchange.model = model
    upstream = state.upstream(_route(state, model, body, payload).name)
    exchange.upstream = upstream.route.name
    plan = plan_request(
        request.method,
        request.raw_path.partition("?")[0],
        normalize=upstream.normalize is not None,
        modes=upstream.options.protocol_modes(),
    )
    forwarding = upstream.options.forwarding()
    _check_payload(state.settings, plan, forwarding, payload)
    size = len(body) if body is not None else 0
    if plan.mode is Mode.LOCAL:
        return await off_loop(size, local_answer, plan, payload)
    needs = upstream.template.needs
    if plan.mode is Mode.TRANSLATE:
        chat, data, repairs = await off_loop(size, _translated, plan, payload, forwarding, needs)
        payload = None  # what the chat request does not share of it goes now
        exchange.request_repairs.update(repairs)
        request.app[METRICS].dropped(plan.protocol.name if plan.protocol else "", chat.dropped)
        with upstream.slots.take():
            async with UpstreamCall(
                request, state, upstream, data, path=plan.upstream_path, plan=plan
            ) as resp:
                return await respond_translated(request, state, upstream, plan, chat, resp)
    # the request as the upstream's chat template takes it (docs/repairs.md): a chat client's
    # under request_repairs = "auto", a native one's for what local servers cannot take
    sent, repairs = payload, Counter[str]()
    names: Mapping[str, ToolRef] = {}
    if plan.mode is Mode.CHAT and upstream.normalize and upstream.normalize.request_repairs:
        sent, repairs = await off_loop(size, _repaired_chat, payload, needs)
    elif plan.mode is Mode.NATIVE and plan.protocol is not None and isinstance(payload, dict):
        native = await off_loop(size, NATIVE_REQUEST_REPAIRS[plan.protocol.name], payload)
        sent, repairs, names = native.body, native.repairs, native.names
    exchange.request_repairs.update(repairs)
    body = _forwarded(forwarding, sent, body, repaired=bool(repairs))
    # what the repair of the answer reads of the request (a chat completion's: its tools)
    facts = streams.request_facts(plan, payload) if plan.mode in _REPAIRS_ANSWER else None
    payload = sent = None  # the rest of the request goes now
    with upstream.slots.take():
        async with UpstreamCall(request, state, upstream, body, plan=plan) as resp:
            if plan.mode is Mode.NATIVE:
                return await respond_native(request, state, upstream, plan, facts, resp, names)
            return await _respond(request, state, upstream, plan, facts, resp)


def _route(
    state: ProxyState, model: str | None, body: bytes | bytearray | None, payload: object
) -> Upstream:
    """The upstream for ``model``; a body that names none because it is no JSON object is
    the client's mistake, said as such (a 400), where the router alone could only say 404."""
    try:
        return state.router.route(model)
    except NoRouteError:
        if model is None and body and not isinstance(payload, dict):
            what = "not valid JSON" if payload is None else "not a JSON object"
            raise ClientRequestError(
                f"the request body is {what}, so it names no model, and with several upstreams"
                " and no default_upstream the proxy cannot tell which one serves it"
            ) from None
        raise


#: a body at least this large is translated (or answered) in a worker thread: the conversion
#: is Python, a second or more for a million conversation turns, and on the event loop it
#: would stall every stream; the thread shares the GIL, which the loop gets back every few
#: milliseconds. A smaller body costs less than a thread's hand-over.
OFF_LOOP_BYTES: Final = 1 << 20

_T = TypeVar("_T")


async def off_loop(size: int, work: Callable[..., _T], *args: object) -> _T:
    """``work(*args)``, in a worker thread when the body is ``OFF_LOOP_BYTES`` or more."""
    if size < OFF_LOOP_BYTES:
        return work(*args)
    return await asyncio.to_thread(work, *args)


def _translated(
    plan: Plan, payload: object, forwarding: Forwarding, needs: TemplateNeeds
) -> tuple[ChatRequest, bytes, Counter[str]]:
    """The chat request for the client's, as every template takes it (the proxy built it:
    the request repairs always apply), its body as sent (``model_map`` and
    ``max_tokens_limit`` applied), and the request repairs made."""
    chat = translate_request(plan, payload)
    fixed = repair_request(chat.body, needs)
    chat = replace(chat, body=fixed.body)
    forwarding.apply(chat.body)
    return chat, orjson.dumps(chat.body), fixed.repairs


def _repaired_chat(payload: object, needs: TemplateNeeds) -> tuple[object, Counter[str]]:
    """A chat client's request as the upstream's template takes it, and the repairs; the very
    payload when no rule applies, so that its bytes go out as they came."""
    if not isinstance(payload, dict):
        return payload, Counter()
    repaired = repair_request(payload, needs)
    return repaired.body, repaired.repairs


#: the plans whose answer is repaired in the client's own protocol
_REPAIRS_ANSWER: Final = frozenset({Mode.CHAT, Mode.NATIVE})

#: the plans whose request body the proxy reads beyond its model (translates, repairs against,
#: or answers itself)
_READS_BODY: Final = frozenset({Mode.TRANSLATE, Mode.NATIVE, Mode.LOCAL})


def _check_payload(settings: Settings, plan: Plan, forwarding: Forwarding, payload: object) -> None:
    """The bounds of proxy/core/request_limits.py, on a body the proxy goes on to work on or
    write again, before anything is done with it."""
    reads = plan.mode in _READS_BODY
    if reads:  # first: it reads list lengths only
        check_tools(payload, settings.limits.max_tools)
    if reads or (forwarding.active and isinstance(payload, dict)):
        check_depth(payload, settings.limits.max_json_depth)
    if plan.mode is Mode.NATIVE and plan.protocol is not None and isinstance(payload, dict):
        plan.protocol.check_native(payload)


def _forwarded(
    forwarding: Forwarding, payload: object, body: bytes | bytearray | None, *, repaired: bool
) -> bytes | bytearray | None:
    """The body with the upstream's model_map and max_tokens_limit applied (the client's
    payload stays as it asked, for the answer), re-encoded when the request repairer changed
    it; the very body when nothing changes it."""
    if not isinstance(payload, dict) or not (forwarding.active or repaired):
        return body
    forwarded = dict(payload)
    changed = forwarding.apply(forwarded) if forwarding.active else False
    return orjson.dumps(forwarded) if changed or repaired else body


class UpstreamCall:
    """Send the request upstream and map failures before the response to 502/504."""

    def __init__(
        self,
        request: web.Request,
        state: ProxyState,
        upstream: UpstreamConfig,
        body: bytes | bytearray | None,
        *,
        path: str | None = None,
        plan: Plan | None = None,
    ) -> None:
        self._request = request
        self._plan = plan
        self._state = state
        self._upstream = upstream
        self._body = body
        self._path = path  # another path than the client's, without its query (translate)
        self._resp: ClientResponse | None = None

    async def __aenter__(self) -> ClientResponse:
        request, upstream, timeouts = self._request, self._upstream, self._state.settings.timeouts
        # encoded=True: the client's path and query go out byte for byte, never re-normalized.
        target = request.raw_path if self._path is None else self._path
        url = URL(upstream_url(upstream.route.base_url, target), encoded=True)
        headers = _upstream_headers(request, self._state.settings, upstream, self._plan)
        # No body stays no body: an empty bytes value would add a Content-Length the
        # client never sent.
        data: Any = request.content
        if self._body is not None:
            data = ForwardedBody(self._body) if self._body else None
        try:
            async with asyncio.timeout(timeouts.first_byte):
                self._resp = await keepalive.request(
                    self._state.session,
                    request.method,
                    url,
                    replayable=self._body is not None,
                    headers=headers,
                    data=data,
                    allow_redirects=False,
                    timeout=_client_timeout(timeouts.connect),
                )
        except TimeoutError as exc:
            kind = (
                "connect_timeout"
                if isinstance(exc, ConnectionTimeoutError)
                else "first_byte_timeout"
            )
            request[EXCHANGE].upstream_failed(upstream.route.name, kind)
            raise UpstreamTimeout(f"upstream {upstream.route.name!r} timed out") from exc
        except ClientConnectionError as exc:
            request[EXCHANGE].upstream_failed(upstream.route.name, "unreachable")
            raise UpstreamError(
                f"upstream {upstream.route.name!r} is unreachable: {type(exc).__name__}"
            ) from exc
        except ClientResponseError as exc:
            # A malformed status line or headers (too long, too many, not HTTP at all).
            request[EXCHANGE].upstream_failed(upstream.route.name, "invalid_response")
            raise UpstreamError(
                f"upstream {upstream.route.name!r} sent an invalid response head"
            ) from exc
        return self._resp

    async def __aexit__(self, *exc_info: object) -> None:
        if self._resp is not None:
            # release() returns a fully read connection to the pool; close() drops one that
            # was abandoned mid-body (client gone, error), which is also what cancels the
            # upstream's generation.
            if self._resp.content.at_eof():
                self._resp.release()
            else:
                self._resp.close()


@cache
def _client_timeout(connect: float) -> ClientTimeout:
    """aiohttp's timeouts for an upstream request: only the connect's (``timeouts.first_byte``
    bounds the rest), one object for every request."""
    return ClientTimeout(total=None, sock_connect=connect)


def _upstream_headers(
    request: web.Request, settings: Settings, upstream: UpstreamConfig, plan: Plan | None
) -> CIMultiDict[str]:
    headers = end_to_end(request.headers, drop=[hdrs.HOST, hdrs.CONTENT_LENGTH, hdrs.EXPECT])
    # the client's key is for the proxy only when auth is on; the upstream's replaces it
    auth = settings.auth.enabled
    if plan is None:  # GET /v1/models, asked of every upstream
        messages = plan_request(
            "POST",
            "/v1/messages",
            normalize=upstream.normalize is not None,
            modes=upstream.options.protocol_modes(),
        )
        apply_listing_credentials(headers, messages, upstream.authorization, auth_enabled=auth)
    else:
        apply_credentials(headers, plan, upstream.authorization, auth_enabled=auth)
    if upstream.options.normalize:
        # A response we may rewrite must arrive uncompressed; others keep the client's choice.
        headers[hdrs.ACCEPT_ENCODING] = "identity"
    set_forwarded(
        headers, remote=request.remote, scheme=request.scheme, settings=settings.forwarded
    )
    headers["X-Request-Id"] = request[REQUEST_ID]
    return headers


async def _respond(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    plan: Plan,
    facts: object,
    resp: ClientResponse,
) -> web.StreamResponse:
    """A chat completion's or a passthrough request's response; the plan says which is
    rewritten (proxy.core.policy). ``facts``: what the repair reads of the request."""
    exchange = request[EXCHANGE]
    exchange.meter.upstream_headers_at = perf_counter()
    kind = media_type(resp)
    encoded = hdrs.CONTENT_ENCODING in resp.headers
    rewrite = rewrites_response(plan, resp.status, kind, encoded)
    head = b""
    if rewrite and kind == "application/json":
        body, complete = await read_capped(
            resp, state.settings.limits.max_response_body_bytes, idle=state.settings.timeouts.idle
        )
        if complete:
            return _completion_response(request, upstream, plan, facts, resp, body)
        head = body  # too large to hold, or cut off: what came goes out first, then the rest
    rewriting = None
    if rewrite and kind == "text/event-stream":
        assert upstream.normalize is not None  # a chat plan is made only for a normalizing one
        rewriting = streams.rewrite_stream(
            plan, options=upstream.normalize, request=facts, new_id=new_id_factory()
        )
    response = web.StreamResponse(status=resp.status, reason=resp.reason)
    drop = (hdrs.CONTENT_LENGTH,) if rewriting is not None else ()
    response.headers.extend(end_to_end(resp.headers, drop=drop))
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    if kind == "text/event-stream":
        response.headers["X-Accel-Buffering"] = "no"
    await response.prepare(request)
    exchange.response_started(
        resp.status, streaming=kind == "text/event-stream", repair_source=rewriting
    )
    if head:
        exchange.meter.received(head)
        exchange.meter.sending(head)
        await response.write(head)
    return await relay(
        request,
        state,
        upstream,
        resp,
        response,
        transform=None if rewriting is None else rewriting.transform,
        repairs=None if rewriting is None else rewriting.repairs,
    )


def _completion_response(
    request: web.Request,
    upstream: UpstreamConfig,
    plan: Plan,
    facts: object,
    resp: ClientResponse,
    body: bytes,
) -> web.Response:
    """The non-streaming chat completion, repaired."""
    assert upstream.normalize is not None
    exchange = request[EXCHANGE]
    exchange.meter.received(body)
    fixed, repairs = streams.repair_whole(
        plan, body=body, options=upstream.normalize, request=facts, new_id=new_id_factory()
    )
    exchange.completion_rewritten(resp.status, repairs)
    exchange.meter.sending(fixed)
    if repairs:
        log.debug("upstream %s completion repairs: %s", upstream.route.name, dict(repairs))
    response = web.Response(status=resp.status, reason=resp.reason, body=fixed)
    response.headers.extend(end_to_end(resp.headers, drop=(hdrs.CONTENT_LENGTH,)))
    response.headers["X-Request-Id"] = request[REQUEST_ID]
    return response


async def handle_models(request: web.Request) -> web.StreamResponse:
    """GET /v1/models: the union of every upstream's list, asked concurrently."""
    state = request.app[STATE]
    upstreams = [state.upstream(u.name) for u in state.router.upstreams]
    results = await asyncio.gather(*(_list_models(request, state, u) for u in upstreams))
    seen: set[object] = set()
    data: list[object] = []
    for models in results:
        for entry in models or ():
            key = entry.get("id") if isinstance(entry, dict) else None
            if key not in seen:
                seen.add(key)
                data.append(entry)
    if all(models is None for models in results):
        raise UpstreamError("no upstream answered GET /v1/models")
    return web.Response(
        body=orjson.dumps({"object": "list", "data": data}), content_type="application/json"
    )


async def _list_models(
    request: web.Request, state: ProxyState, upstream: UpstreamConfig
) -> list[Any] | None:
    try:
        async with UpstreamCall(request, state, upstream, b"") as resp:
            if resp.status != 200:
                raise UpstreamError(f"status {resp.status}")
            body = orjson.loads(await resp.read())
            data = body.get("data") if isinstance(body, dict) else None
            if not isinstance(data, list):
                raise UpstreamError("no data list in the answer")
            return data
    except (UpstreamError, orjson.JSONDecodeError, ClientError) as exc:
        log.warning("GET /v1/models: skipping upstream %s: %s", upstream.route.name, exc)
        return None
