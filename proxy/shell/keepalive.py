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
import weakref
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from aiohttp import (
    ClientOSError,
    ClientRequest,
    ClientResponse,
    ClientSession,
    ClientTimeout,
    ServerDisconnectedError,
    TCPConnector,
)
from aiohttp.connector import Connection
from aiohttp.tracing import Trace

log = logging.getLogger("toolcall_proxy")


@dataclass
class _Attempt:
    reused: bool = False


#: the attempt :func:`request` is sending in this task, for the connector to mark as reused
_ATTEMPT: ContextVar[_Attempt | None] = ContextVar("upstream_attempt", default=None)


class ReuseConnector(TCPConnector):
    """A TCPConnector that tells :func:`request` whether the connection it handed out had
    served a request before.

    A connection it hands out a second time is a reused one. This replaces aiohttp's
    ``on_connection_reuseconn`` trace signal: any TraceConfig on the session makes aiohttp
    build a Trace and send six signals on every request (start, headers, chunk, reuse,
    end), about 30 us of a request's CPU, for the one answer wanted here.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._handed_out: weakref.WeakSet[object] = weakref.WeakSet()

    async def connect(
        self,
        req: ClientRequest,
        traces: list[Trace],
        timeout: ClientTimeout,  # noqa: ASYNC109 (aiohttp's signature)
    ) -> Connection:
        conn = await super().connect(req, traces, timeout)
        protocol = conn.protocol
        if protocol is not None:
            if protocol in self._handed_out:
                attempt = _ATTEMPT.get()
                if attempt is not None:
                    attempt.reused = True
            else:
                self._handed_out.add(protocol)
        return conn


def _before_any_answer(exc: ServerDisconnectedError | ClientOSError) -> bool:
    # ServerDisconnectedError carries the partial response head when one had arrived.
    return not isinstance(exc, ServerDisconnectedError) or isinstance(exc.message, str)


async def request(
    session: ClientSession, method: str, url: Any, *, replayable: bool, **kwargs: Any
) -> ClientResponse:
    """``session.request``, sent again when it met a stale reused connection."""
    while True:
        state = _Attempt()
        token = _ATTEMPT.set(state)
        try:
            return await session.request(method, url, **kwargs)
        except (ServerDisconnectedError, ClientOSError) as exc:
            if not (replayable and state.reused and _before_any_answer(exc)):
                raise
            log.info(
                "%s %s: reused upstream connection was closed (%r); sending again", method, url, exc
            )
        finally:
            _ATTEMPT.reset(token)
