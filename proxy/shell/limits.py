"""Request limits enforced by the shell: concurrency per upstream, and the HTTP server's caps.

Concurrency: an upstream with ``max_concurrent_requests`` serves at most that many requests at
once through this proxy, per replica when it has several (``urls``): a full replica is passed
over, and only when every one is full is a request refused, at once, with 429 and
``Retry-After: 1`` rather than queued (the count lives in the upstream's
:class:`~proxy.core.replicas.ReplicaPool`, which :mod:`proxy.shell.upstream` asks). LLM
servers already queue behind their own slots (llama.cpp's ``--parallel``, vLLM's scheduler),
so a second queue here would only hide the overload and hold sockets, while OpenAI-style
clients retry a 429 with backoff on their own. A slot is held from the attempt until the
response (streamed or not) has ended or the client has left. The count is per
process: with ``workers = N`` each worker holds its own, so N times the limit can be in flight.

Size caps: the request body (``limits.max_request_body_bytes``, 413, applied by
:mod:`proxy.shell.request_body` to bodies the proxy reads) and each request line or header line
(``limits.max_header_bytes``, 400 from aiohttp's HTTP parser, before any handler runs).

Time caps: a request's headers must have arrived ``timeouts.request_headers`` after the
connection opened or its previous response ended. That is aiohttp's ``keepalive_timeout``,
which since aiohttp 3.14.4 runs from the connection's start and closes a connection whose
next request has not been parsed in time, idle or half-sent alike. A body the proxy reads
must arrive within ``timeouts.request_body`` (:mod:`proxy.shell.request_body`).
"""

from __future__ import annotations

from typing import Any, Final

from proxy.core.errors import TooManyRequests
from proxy.core.replicas import Backoff, ReplicaPool
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.serverlog import SERVER_LOG


def replica_pool(options: UpstreamSettings) -> ReplicaPool:
    """An upstream's replicas (one for a single ``url``), each held to its limit."""
    return ReplicaPool(
        options.replica_urls(),
        Backoff(options.eject_seconds, options.max_eject_seconds),
        options.max_concurrent_requests,
    )


def all_full(options: UpstreamSettings) -> TooManyRequests:
    """The 429 for a request that found every replica at its limit."""
    which = (
        f"upstream {options.name!r} is"
        if options.urls is None or len(options.urls) == 1
        else (f"every replica of upstream {options.name!r} is")
    )
    return TooManyRequests(
        f"{which} serving its maximum of {options.max_concurrent_requests} requests; retry shortly"
    )


# Connections the kernel may queue before the proxy accepts them (capped by
# net.core.somaxconn). aiohttp's 128 overflows when hundreds of clients connect at once, and
# an overflowing queue drops or resets connections; uvicorn's default is the same 2048.
LISTEN_BACKLOG: Final = 2048


def server_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for aiohttp's server (web.run_app, AppRunner, TestServer)."""
    return {
        "max_line_size": settings.limits.max_header_bytes,
        "max_field_size": settings.limits.max_header_bytes,
        "keepalive_timeout": settings.timeouts.request_headers,
        "logger": SERVER_LOG,  # one line per refused request, not a traceback
    }
