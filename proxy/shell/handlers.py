"""The request's side of the proxy: read the body, route it, ask the core's policy for the
plan, and make the request the upstream gets (translated, repaired for its chat template,
``model_map`` applied); then :mod:`proxy.shell.upstream` sends it and
:mod:`proxy.shell.respond` answers. Errors raised before the response starts are ProxyErrors,
turned into the client's protocol's error shape by the error middleware.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Final, TypeVar

import orjson
from aiohttp import web

from proxy.core import streams
from proxy.core.affinity import affinity_key
from proxy.core.errors import ClientRequestError, NoRouteError
from proxy.core.forwarding import Forwarding
from proxy.core.policy import Mode, Plan, plan_request
from proxy.core.request_limits import check_depth, check_tools
from proxy.core.request_repairs.native import NATIVE_REQUEST_REPAIRS
from proxy.core.request_repairs.needs import TemplateNeeds
from proxy.core.request_repairs.repair import repair_request
from proxy.core.routing import Upstream, is_safe_path
from proxy.settings import Settings
from proxy.shell.app_state import STATE, ProxyState, UpstreamConfig
from proxy.shell.exchange import EXCHANGE
from proxy.shell.metrics import METRICS
from proxy.shell.request_body import body_model, read_body
from proxy.shell.respond import local_answer, respond
from proxy.shell.upstream import UpstreamCall, handle_models

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
    state = request.app[STATE].now  # kept to the end: a reload does not change it
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
    key = conversation(request, upstream, payload)
    plan = plan_request(
        request.method,
        request.raw_path.partition("?")[0],
        normalize=upstream.normalize is not None,
        modes=upstream.modes,
    )
    forwarding = upstream.forwarding
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
        async with UpstreamCall(
            request, state, upstream, data, path=plan.upstream_path, plan=plan, key=key
        ) as resp:
            return await respond(request, state, upstream, plan, resp, chat=chat)
    # the request as the upstream's chat template takes it (docs/repairs.md): a chat client's
    # under request_repairs = "auto", a native one's for what local servers cannot take
    sent, repairs = payload, Counter[str]()
    names: streams.Renames = {}
    if plan.mode is Mode.CHAT and upstream.normalize and upstream.normalize.request_repairs:
        sent, repairs = await off_loop(size, _repaired_chat, payload, needs)
    elif plan.mode is Mode.NATIVE and plan.protocol is not None and isinstance(payload, dict):
        native = await off_loop(size, NATIVE_REQUEST_REPAIRS[plan.protocol.name], payload)
        sent, repairs, names = native.body, native.repairs, native.names
    exchange.request_repairs.update(repairs)
    body = _forwarded(forwarding, sent, body, repaired=bool(repairs))
    # what the repair of the answer reads of the request (a chat completion's: its tools)
    facts = streams.request_facts(plan, payload) if plan.mode in _REPAIRS_ANSWER else None
    streamed = isinstance(payload, dict) and payload.get("stream") is True
    payload = sent = None  # the rest of the request goes now
    async with UpstreamCall(request, state, upstream, body, plan=plan, key=key) as resp:
        return await respond(
            request, state, upstream, plan, resp, facts=facts, names=names, streamed=streamed
        )


def conversation(request: web.Request, upstream: UpstreamConfig, payload: object) -> str | None:
    """The conversation a request belongs to, when its upstream keeps one on one replica
    (``affinity = "auto"`` with several replicas; proxy/core/affinity.py says what names it)."""
    if upstream.options.affinity != "auto" or len(upstream.replicas.replicas) < 2:
        return None
    return affinity_key(request.headers, payload)


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
) -> tuple[streams.ChatRequest, bytes, Counter[str]]:
    """The chat request for the client's, as every template takes it (the proxy built it:
    the request repairs always apply), its body as sent (``model_map`` and
    ``max_tokens_limit`` applied), and the request repairs made."""
    chat = translate_request(plan, payload)
    fixed = repair_request(chat.body, needs)
    chat = replace(chat, body=fixed.body)
    forwarding.apply(chat.body)
    return chat, orjson.dumps(chat.body), fixed.repairs


def translate_request(plan: Plan, payload: object) -> streams.ChatRequest:
    """The client's request as the chat request to send (a 400 when it cannot be)."""
    chat = streams.chat_request(plan, payload)
    for name in chat.dropped:
        log.debug(
            "%s request: dropped %s (a chat upstream cannot take it)",
            plan.protocol.name if plan.protocol else "",
            name,
        )
    return chat


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
