"""The upstream's side of a request: one call to an upstream (its URL, headers, credentials,
and failures before its answer mapped to 502/504), and ``GET /v1/models`` asked of them all.
"""

from __future__ import annotations

import asyncio
import logging
from functools import cache
from typing import Any

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
from proxy.core.routing import upstream_url
from proxy.settings import Settings
from proxy.shell import keepalive
from proxy.shell.app_state import REQUEST_ID, STATE, ProxyState, UpstreamConfig
from proxy.shell.credentials import apply_credentials, apply_listing_credentials
from proxy.shell.exchange import EXCHANGE
from proxy.shell.forwarded import set_forwarded
from proxy.shell.headers import end_to_end
from proxy.shell.request_body import ForwardedBody

log = logging.getLogger("toolcall_proxy")


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
        plans = own_key_plans(
            normalize=upstream.normalize is not None, modes=upstream.options.protocol_modes()
        )
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
