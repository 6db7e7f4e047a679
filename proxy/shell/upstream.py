"""The upstream's side of a request: one call to an upstream (the replica that serves it,
its URL, headers, credentials, the attempts again elsewhere before any byte reached the
client, and the last failure mapped to 502/504), and ``GET /v1/models`` asked of them all.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from functools import cache
from typing import Any, Final

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

from proxy.core.errors import UpstreamError, UpstreamTimeout
from proxy.core.policy import Plan, own_key_plans
from proxy.core.replicas import Change
from proxy.core.routing import upstream_url
from proxy.settings import Settings
from proxy.shell import keepalive
from proxy.shell.app_state import REQUEST_ID, STATE, ProxyState, UpstreamConfig
from proxy.shell.credentials import apply_credentials, apply_listing_credentials
from proxy.shell.exchange import EXCHANGE
from proxy.shell.forwarded import set_forwarded
from proxy.shell.headers import end_to_end
from proxy.shell.limits import all_full
from proxy.shell.metrics import METRICS
from proxy.shell.replica_health import told
from proxy.shell.request_body import ForwardedBody

log = logging.getLogger("toolcall_proxy")


#: the upstream statuses that say a replica cannot serve now: failures of its health, retried
RETRIED_STATUSES: Final = frozenset({502, 503, 504})
#: a 429 is retried only when its Retry-After (seconds) is at most this, and fits the budget
MAX_RETRY_AFTER: Final = 2.0


@dataclass(frozen=True, slots=True)
class _Failed:
    """An attempt that failed before the response head: its kind, and the error to raise
    when it is the last."""

    kind: str
    error: UpstreamError


class UpstreamCall:
    """Send the request upstream, to one of its replicas, and again to another when the
    attempt failed before any of its answer reached the client; map the last failure to
    502/504.

    An attempt is sent again (at most ``retries`` times, within ``timeouts.first_byte`` of
    the first one) after a connect error, a reset before the response head, a 502/503/504,
    or a 429 whose ``Retry-After`` is at most 2 s and fits in what is left of that time
    (waited for first). Never after the response head was taken (the caller has it from
    then on), never for another status, and never for a body streamed through unread: it
    is gone once sent.
    """

    def __init__(
        self,
        request: web.Request,
        state: ProxyState,
        upstream: UpstreamConfig,
        body: bytes | bytearray | None,
        *,
        path: str | None = None,
        plan: Plan | None = None,
        key: str | None = None,
        limited: bool = True,
    ) -> None:
        self._request = request
        self._plan = plan
        self._state = state
        self._upstream = upstream
        self._body = body
        self._path = path  # another path than the client's, without its query (translate)
        self._key = key  # the conversation, for affinity (proxy/core/affinity.py)
        self._limited = limited  # held to max_concurrent_requests (a client's request is)
        self._resp: ClientResponse | None = None
        self._serving: int | None = None  # the replica whose answer the caller has

    async def __aenter__(self) -> ClientResponse:
        upstream, timeouts = self._upstream, self._state.settings.timeouts
        exchange = self._request[EXCHANGE]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeouts.first_byte
        retries = upstream.retries if self._body is not None else 0
        tried: list[int] = []
        try:
            async with asyncio.timeout_at(deadline):
                while True:
                    index = upstream.replicas.pick(
                        loop.time(), self._key, tried, limited=self._limited
                    )
                    if index is None:
                        raise all_full(upstream.options)
                    tried.append(index)
                    outcome = await self._attempt(index)
                    last = len(tried) > retries
                    if isinstance(outcome, _Failed):
                        if last:
                            raise outcome.error
                        self._retrying(outcome.kind)
                        continue
                    pause = None if last else self._retry_pause(outcome, deadline - loop.time())
                    if pause is None:
                        self._resp, self._serving = outcome, index
                        return outcome
                    outcome.close()
                    self._finished(index)
                    self._retrying(f"http_{outcome.status}")
                    await asyncio.sleep(pause)
        except TimeoutError as exc:
            exchange.upstream_failed(upstream.route.name, "first_byte_timeout")
            raise UpstreamTimeout(f"upstream {upstream.route.name!r} timed out") from exc

    async def _attempt(self, index: int) -> ClientResponse | _Failed:
        """One attempt on one replica: its response (the replica then counts it in flight
        until the caller is done), or how it failed (and the replica no longer does)."""
        request, upstream = self._request, self._upstream
        name, pool = upstream.route.name, upstream.replicas
        replica = pool.replicas[index]
        exchange = request[EXCHANGE]
        exchange.attempts += 1
        exchange.replica = replica.url
        loop = asyncio.get_running_loop()
        # encoded=True: the client's path and query go out byte for byte, never re-normalized.
        target = request.raw_path if self._path is None else self._path
        url = URL(upstream_url(replica.url, target), encoded=True)
        headers = _upstream_headers(request, self._state.settings, upstream, self._plan)
        # No body stays no body: an empty bytes value would add a Content-Length the
        # client never sent.
        data: Any = request.content
        if self._body is not None:
            data = ForwardedBody(self._body) if self._body else None
        began = loop.time()
        pool.begin(index)
        request.app[METRICS].attempt(name, replica.url, began=True)
        answered = False
        try:
            resp = await keepalive.request(
                self._state.session,
                request.method,
                url,
                replayable=self._body is not None,
                headers=headers,
                data=data,
                allow_redirects=False,
                timeout=_client_timeout(self._state.settings.timeouts.connect),
            )
            answered = True
        except ClientConnectionError as exc:
            failed = _failure(name, exc)
        except ClientResponseError as exc:
            # A malformed status line or headers (too long, too many, not HTTP at all): a
            # broken server, not a dead one; not retried.
            exchange.upstream_failed(name, "invalid_response")
            raise UpstreamError(f"upstream {name!r} sent an invalid response head") from exc
        finally:
            if not answered:
                self._finished(index)
        now = loop.time()
        if not answered:
            exchange.upstream_failed(name, failed.kind)
            self._health(index, pool.failed(index, now, began=began), failed.kind)
            return failed
        if resp.status in RETRIED_STATUSES:
            self._health(index, pool.failed(index, now, began=began), "http_5xx")
        else:
            told(upstream, pool.answered(index, now, began=began), f"answered {resp.status}")
        return resp

    def _retry_pause(self, resp: ClientResponse, left: float) -> float | None:
        """How long to wait before sending again after ``resp``; None: it is the answer."""
        if resp.status in RETRIED_STATUSES:
            self._request[EXCHANGE].upstream_failed(self._upstream.route.name, "http_5xx")
            return 0.0
        if resp.status != 429:
            return None
        wait = retry_after(resp.headers.get(hdrs.RETRY_AFTER))
        if wait is None or wait > MAX_RETRY_AFTER or wait >= left:
            return None
        return wait

    def _health(self, index: int, change: Change, kind: str) -> None:
        name, metrics = self._upstream.route.name, self._request.app[METRICS]
        metrics.replica_failed(name, change.replica.url, kind, ejected=False)
        told(self._upstream, change, kind, metrics)

    def _retrying(self, reason: str) -> None:
        name = self._upstream.route.name
        self._request.app[METRICS].retried(name, reason)
        log.info(
            "request %s: upstream %s failed before its answer (%s); sending it again",
            self._request[REQUEST_ID],
            name,
            reason,
        )

    def _finished(self, index: int) -> None:
        pool = self._upstream.replicas
        pool.end(index)
        self._request.app[METRICS].attempt(
            self._upstream.route.name, pool.replicas[index].url, began=False
        )

    async def __aexit__(self, *exc_info: object) -> None:
        if self._serving is not None:
            self._finished(self._serving)
            self._serving = None
        if self._resp is not None:
            # release() returns a fully read connection to the pool; close() drops one that
            # was abandoned mid-body (client gone, error), which is also what cancels the
            # upstream's generation.
            if self._resp.content.at_eof():
                self._resp.release()
            else:
                self._resp.close()


def _failure(upstream: str, exc: ClientConnectionError) -> _Failed:
    """A connection refused, reset or closed before the response head, or a connect that
    took longer than ``timeouts.connect``."""
    if isinstance(exc, ConnectionTimeoutError):
        return _Failed("connect_timeout", UpstreamTimeout(f"upstream {upstream!r} timed out"))
    return _Failed(
        "unreachable",
        UpstreamError(f"upstream {upstream!r} is unreachable: {type(exc).__name__}"),
    )


def retry_after(value: str | None) -> float | None:
    """A ``Retry-After`` in seconds (its delta-seconds form; a date is not waited for)."""
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


@cache
def _client_timeout(connect: float) -> ClientTimeout:
    """aiohttp's timeouts for an upstream request: only the connect's (``timeouts.first_byte``
    bounds the rest), one object for every request."""
    return ClientTimeout(total=None, sock_connect=connect)


def _upstream_headers(
    request: web.Request, settings: Settings, upstream: UpstreamConfig, plan: Plan | None
) -> CIMultiDict[str]:
    headers = end_to_end(request.headers, drop=(hdrs.HOST, hdrs.CONTENT_LENGTH, hdrs.EXPECT))
    # the client's key is for the proxy only when auth is on; the upstream's replaces it
    auth = settings.auth.enabled
    if plan is None:  # GET /v1/models, asked of every upstream
        plans = own_key_plans(normalize=upstream.normalize is not None, modes=upstream.modes)
        apply_listing_credentials(headers, plans, upstream.authorization, auth_enabled=auth)
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


async def handle_models(request: web.Request) -> web.StreamResponse:
    """GET /v1/models: the union of every upstream's list, asked concurrently."""
    state = request.app[STATE].now
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
        # the listing is the proxy's own question: no client's slot is taken for it
        async with UpstreamCall(request, state, upstream, b"", limited=False) as resp:
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
