"""The access log: one JSON line per proxied request, written when the request ends.

The middleware here opens each request's Exchange and, however the request ends (answered,
failed, aborted, or cancelled because the client left), records it in the metrics and logs
it once. The proxy's own endpoints (``/-/health``, ``/-/ready``, ``/-/metrics``) are polled by
orchestrators every few seconds and are neither logged nor counted.

The line goes to the ``toolcall_proxy.access`` logger at INFO, so ``log_level = "warning"``
turns it off. Fields: ``time``, ``request_id``, ``method``, ``path``, ``upstream``,
``model``, ``status``, ``duration_ms``, ``ttfb_ms`` (request received to the first body byte
sent; null without a body), ``bytes`` and ``chunks`` (body bytes and writes sent to the
client), ``bytes_upstream`` (body bytes read from the upstream), ``rewritten``, ``end``,
``repairs`` (kind -> count), ``upstream_errors`` (kinds), ``tokens`` (kind -> the tokens
the upstream reported), ``replica`` (the URL of the replica that served; null when none was
asked) and ``attempts`` (requests sent upstream for it: 2 after one retry; 0 when none was
sent). ``end`` is ``proxy_error`` for a request the proxy failed on (proxy.shell.middlewares).
With several workers (``workers`` > 1) every JSON line also names the process that wrote it,
``worker`` (1..N), right after ``time``; with one worker the field is absent.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime
from time import perf_counter
from typing import Any, Final

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from proxy.shell.app_state import REQUEST_ID
from proxy.shell.exchange import EXCHANGE, Exchange
from proxy.shell.metrics import METRICS

ACCESS_LOGGER: Final = "toolcall_proxy.access"
access_log = logging.getLogger(ACCESS_LOGGER)

MAX_LOGGED_MODEL: Final = 256
CLIENT_GONE: Final = "client_gone"  # the client left; the handler was cancelled
NO_RESPONSE_STATUS: Final = 499  # nginx's "client closed request", for a client that left early


def access_middleware(own_prefix: str) -> Middleware:
    """Open an Exchange for each proxied request and record it when the request ends."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path.startswith(own_prefix):
            return await handler(request)
        exchange = Exchange(
            request_id=request[REQUEST_ID],
            method=request.method,
            path=request.path,
            started_at=perf_counter(),
        )
        request[EXCHANGE] = exchange
        metrics = request.app[METRICS]
        metrics.begin(exchange)
        try:
            response = await handler(request)
        except asyncio.CancelledError:
            exchange.end = exchange.end or CLIENT_GONE
            exchange.status = exchange.status or NO_RESPONSE_STATUS
            raise
        except web.HTTPException as exc:
            exchange.status = exc.status
            raise
        except BaseException:
            exchange.status = exchange.status or 500
            raise
        else:
            exchange.status = exchange.status or response.status
            _count_own_body(exchange, response)
            return response
        finally:
            metrics.end(exchange)
            log_exchange(exchange)

    return middleware


def _count_own_body(exchange: Exchange, response: web.StreamResponse) -> None:
    """A whole body of the proxy's own making (an error, a model list, a token count) that
    nothing counted on its way: aiohttp writes it once the middlewares are done."""
    if exchange.meter.writes or response.prepared or not isinstance(response, web.Response):
        return
    body = response.body
    if isinstance(body, bytes) and body:
        exchange.meter.sending(body)


def access_fields(exchange: Exchange, now: float) -> dict[str, Any]:
    meter = exchange.meter
    first_out = meter.first_out_at
    model = exchange.model
    return {
        "request_id": exchange.request_id,
        "method": exchange.method,
        "path": exchange.path,
        "upstream": exchange.upstream,
        "model": model[:MAX_LOGGED_MODEL] if model is not None else None,
        "status": exchange.status,
        "duration_ms": _ms(now - exchange.started_at),
        "ttfb_ms": _ms(first_out - exchange.started_at) if first_out is not None else None,
        "bytes": meter.bytes_out,
        "chunks": meter.writes,
        "bytes_upstream": meter.bytes_in,
        "rewritten": exchange.rewritten,
        "end": exchange.end,
        # by name: the counters are keyed by Repair members, and orjson takes only str keys
        "repairs": {str(kind): count for kind, count in exchange.all_repairs().items()},
        "request_repairs": {str(kind): count for kind, count in exchange.request_repairs.items()},
        "upstream_errors": [kind for _, kind in exchange.upstream_errors],
        "tokens": dict(tokens.reported()) if (tokens := exchange.reported_tokens()) else {},
        "replica": exchange.replica,
        "attempts": exchange.attempts,
    }


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def log_exchange(exchange: Exchange) -> None:
    if access_log.isEnabledFor(logging.INFO):
        # What access_log.info() does, without its walk up the stack for the caller's file
        # and line, which no access line shows: a record made and handled directly.
        fields = access_fields(exchange, perf_counter())
        record = access_log.makeRecord(
            ACCESS_LOGGER, logging.INFO, __file__, 0, "access", (), None, extra={"access": fields}
        )
        access_log.handle(record)


class JsonAccessFormatter(logging.Formatter):
    """Formats an access record as one JSON object; other records as JSON with a message."""

    def __init__(self, worker: int = 0) -> None:
        super().__init__()
        self._worker = {"worker": worker} if worker else {}

    def format(self, record: logging.LogRecord) -> str:
        time = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        fields = getattr(record, "access", None)
        if not isinstance(fields, dict):
            fields = {"level": record.levelname.lower(), "message": record.getMessage()}
        return orjson.dumps(
            {"time": time.replace("+00:00", "Z"), **self._worker, **fields}
        ).decode()


def configure_logging(level: str, stream: Any = None, worker: int = 0) -> None:
    """The process's logging: ``level`` for every logger; the access log as JSON lines only.

    Both go to ``stream`` (stderr by default), where container runtimes and journald collect them.
    ``worker`` (1..N, one of several worker processes) is named on every line; a worker calls
    this again after the fork, replacing the supervisor's handlers.
    """
    where = f"[worker {worker}] " if worker else ""
    logging.basicConfig(
        format=f"%(asctime)s %(levelname)s %(name)s {where}%(message)s",
        stream=stream,
        force=bool(worker),
    )
    logging.getLogger().setLevel(level.upper())
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonAccessFormatter(worker))
    for old in list(access_log.handlers):
        access_log.removeHandler(old)
    access_log.addHandler(handler)
    access_log.propagate = False
