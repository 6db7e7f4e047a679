"""A response body streamed to the client through the pump, and how its end is answered:
``write_eof`` after a complete body, an aborted connection after any other end (so the
client sees the cut, never a clean finish), but for a translated response that failed: its
failure event is its end, so the body ends there and both connections close (the upstream's
is left unread). Shared by every kind of stream the handlers start: passthrough, chat
rewriting, translated and native protocol streams."""

from __future__ import annotations

import logging
from collections import Counter

from aiohttp import ClientResponse, web

from proxy.core.repairs import Repair
from proxy.shell.app_state import ProxyState, UpstreamConfig
from proxy.shell.exchange import EXCHANGE
from proxy.shell.pump import BodyTransform, End, pump

log = logging.getLogger("toolcall_proxy")


async def relay(
    request: web.Request,
    state: ProxyState,
    upstream: UpstreamConfig,
    resp: ClientResponse,
    response: web.StreamResponse,
    *,
    transform: BodyTransform | None,
    repairs: Counter[str] | None,
) -> web.StreamResponse:
    """Pump ``resp``'s body into the prepared ``response``; ``repairs`` is the transform's
    count of what it changed, read when the stream ends however it ends."""
    exchange = request[EXCHANGE]
    try:
        end = await pump(
            resp,
            response,
            idle_timeout=state.settings.timeouts.idle,
            client_write_timeout=state.settings.timeouts.client_write,
            transform=transform,
            meter=exchange.meter,
        )
    finally:  # also when the client left
        if transform is not None and transform.over:
            log.warning(
                "upstream %s stream: the translated response failed: it outgrew"
                " limits.max_held_bytes, limits.max_response_body_bytes or"
                " limits.max_event_bytes; its failure event ended it, and the rest of the"
                " upstream's body is not read",
                upstream.route.name,
            )
        elif repairs is not None and repairs[Repair.CAP_REACHED]:
            log.warning(
                "upstream %s: a stream outgrew limits.max_event_bytes or limits.max_held_bytes"
                " (or, native, limits.max_response_body_bytes); rewriting stopped there and the"
                " rest was forwarded raw",
                upstream.route.name,
            )
    exchange.body_ended(end.value)
    if repairs:
        log.debug("upstream %s stream repairs: %s", upstream.route.name, dict(repairs))
    if end is End.REWRITE_FAILED:
        response.force_close()
        await response.write_eof()
        return response
    if end is End.CLIENT_STALLED:
        log.warning("upstream %s stream: the client stopped reading; aborting", upstream.route.name)
        if request.transport is not None:
            # abort, not close: close would wait, forever, for the client to take the buffer.
            request.transport.abort()
        return response
    if end is not End.COMPLETE:
        log.warning(
            "upstream %s stream ended early (%s); aborting the client's response",
            upstream.route.name,
            end.value,
        )
        if request.transport is not None:
            # close without ending the response, so the client sees an error
            request.transport.close()
        return response
    await response.write_eof()
    return response
