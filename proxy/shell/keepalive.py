"""The keep-alive race: an upstream closes an idle pooled connection just as it is reused.

An upstream closes a keep-alive connection after its own idle timeout (uvicorn, behind vLLM
and SGLang, and llama.cpp's server: 5 s). If its FIN is still on the way when the proxy takes
that connection from the pool and sends a request, the request meets a closed connection
and fails before any answer. aiohttp retries that only for idempotent methods, and chat
completions are POSTs. As browsers do, the request is sent again on another connection when
all of these hold: the connection was a reused one, nothing of an answer arrived, and the
body is in memory (a streamed upload cannot be replayed). An upstream that is really down
fails the same way on a new connection, and that failure is final. Each retry closes the
stale connection it met, and a new connection is never retried, so the attempts are bounded
by the pool's size (many pooled connections can go stale together, when an upstream's
timer closes them at once) and in any case by ``timeouts.first_byte``, which covers them all.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from aiohttp import (
    ClientOSError,
    ClientResponse,
    ClientSession,
    ServerDisconnectedError,
    TraceConfig,
    TraceConnectionReuseconnParams,
)

log = logging.getLogger("toolcall_proxy")


@dataclass
class _Attempt:
    reused: bool = False


async def _on_reuse(
    session: ClientSession, context: SimpleNamespace, params: TraceConnectionReuseconnParams
) -> None:
    if isinstance(context.trace_request_ctx, _Attempt):
        context.trace_request_ctx.reused = True


def reuse_tracing() -> TraceConfig:
    """The TraceConfig that lets :func:`request` know whether a connection was reused."""
    config = TraceConfig()
    config.on_connection_reuseconn.append(_on_reuse)
    return config


def _before_any_answer(exc: ServerDisconnectedError | ClientOSError) -> bool:
    # ServerDisconnectedError carries the partial response head when one had arrived.
    return not isinstance(exc, ServerDisconnectedError) or isinstance(exc.message, str)


async def request(
    session: ClientSession, method: str, url: Any, *, replayable: bool, **kwargs: Any
) -> ClientResponse:
    """``session.request``, sent again when it met a stale reused connection."""
    while True:
        state = _Attempt()
        try:
            return await session.request(method, url, trace_request_ctx=state, **kwargs)
        except (ServerDisconnectedError, ClientOSError) as exc:
            if not (replayable and state.reused and _before_any_answer(exc)):
                raise
            log.info(
                "%s %s: reused upstream connection was closed (%r); sending again", method, url, exc
            )
