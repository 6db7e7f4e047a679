"""The access log: one JSON line per proxied request, written when the request ends.

``recorded`` (called by the proxy's one middleware, proxy.shell.middlewares) opens each
request's Exchange and, however the request ends (answered, failed, aborted, or cancelled
because the client left), records it in the metrics and logs it once. The proxy's own
endpoints (``/-/health``, ``/-/ready``, ``/-/metrics``) are polled by orchestrators every few
seconds and are neither logged nor counted.

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

Once :func:`configure_logging` has set it up, a line skips the ``logging`` machinery (a
record, its handler's lock, a formatter, a write and a flush for every request): it is
written as bytes into an :class:`AccessWriter`, which writes what it holds once the event
loop's turn is over (a callback scheduled with the first line held: the lines of every
request that ended in that turn go in one write, off the requests' path; well within the
documented bound, ``FLUSH_EVERY``), and at shutdown (``logging.shutdown`` flushes it, as it
does every handler). Each write holds whole
lines and, up to ``PIPE_BUF``, is atomic on a pipe, so the lines of several workers sharing
one stderr never interleave. What ``kill -9`` loses is what was held: the lines of the
requests that ended in the loop's last turn (never more than ``FLUSH_EVERY``'s).
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import sys
import time
import traceback
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from time import perf_counter
from typing import IO, Any, Final

import orjson
from aiohttp import web

from proxy.shell.app_state import REQUEST_ID
from proxy.shell.exchange import EXCHANGE, Exchange
from proxy.shell.metrics import METRICS

ACCESS_LOGGER: Final = "toolcall_proxy.access"
access_log = logging.getLogger(ACCESS_LOGGER)

MAX_LOGGED_MODEL: Final = 256
CLIENT_GONE: Final = "client_gone"  # the client left; the handler was cancelled
NO_RESPONSE_STATUS: Final = 499  # nginx's "client closed request", for a client that left early


async def recorded(
    request: web.Request, answer: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """``answer(request)`` with an Exchange open for it, recorded in the metrics and logged
    once however the request ends (proxy.shell.middlewares calls it for every proxied one)."""
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
        response = await answer(request)
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
        now = perf_counter()  # one clock reading for the metrics and the line
        metrics.end(exchange, now)
        log_exchange(exchange, now)


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


def log_exchange(exchange: Exchange, now: float) -> None:
    if not access_log.isEnabledFor(logging.INFO):
        return
    fields = access_fields(exchange, now)
    handlers = access_log.handlers
    if len(handlers) == 1 and type(handlers[0]) is AccessHandler and not access_log.filters:
        handlers[0].writer.put(fields)  # configure_logging's: the line without a record
        return
    # Another handler (a test's capture, an embedding program's): a record, made and handled
    # directly, without logger.info()'s walk up the stack for a file and line no line shows.
    record = access_log.makeRecord(
        ACCESS_LOGGER, logging.INFO, __file__, 0, "access", (), None, extra={"access": fields}
    )
    access_log.handle(record)


#: the longest an access line may wait in the writer (the docs promise it); it waits one turn
#: of the event loop, which a loop that keeps streams flowing never stretches near this
FLUSH_EVERY: Final = 0.1
#: what the writer holds before it writes without waiting for its timer
MAX_HELD_BYTES: Final = 64 * 1024
#: a write to a pipe of at most this many bytes is atomic (POSIX: at least 512; Linux: 4096)
PIPE_BUF: Final = getattr(select, "PIPE_BUF", 512)


class UtcClock:
    """The access line's ``time``: UTC with milliseconds, as ``datetime.isoformat`` writes it,
    its seconds formatted once a second rather than once a line."""

    def __init__(self) -> None:
        self._second = -1
        self._prefix = ""

    def now(self) -> str:
        stamp = time.time()
        second = int(stamp)
        if second != self._second:
            self._second = second
            self._prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._prefix}.{int((stamp - second) * 1000):03d}Z"


def whole_line_writes(data: bytes, limit: int = PIPE_BUF) -> list[bytes]:
    """``data`` (whole lines) cut into writes of whole lines of at most ``limit`` bytes each,
    but for a line longer than that, which goes alone."""
    if len(data) <= limit:
        return [data]
    writes: list[bytes] = []
    start = 0
    while start < len(data):
        end = data.rfind(b"\n", start, start + limit) + 1
        if end <= start:  # one line longer than the limit
            end = data.index(b"\n", start) + 1
        writes.append(data[start:end])
        start = end
    return writes


class AccessWriter:
    """Access lines held as bytes and written, whole, at the end of the event loop's turn
    (or as soon as ``MAX_HELD_BYTES`` are held)."""

    def __init__(self, stream: IO[str], worker: int = 0) -> None:
        self._stream = stream
        try:
            self._fd: int | None = stream.fileno()
        except (AttributeError, OSError, ValueError):  # io.StringIO: written as text
            self._fd = None
        self._worker = b'"worker":%d,' % worker if worker else b""
        self._clock = UtcClock()
        self._held: list[bytes] = []
        self._size = 0
        self._timer: asyncio.Handle | None = None
        self._timer_loop: asyncio.AbstractEventLoop | None = None

    def put(self, fields: dict[str, Any]) -> None:
        """One access line: ``time`` (now), ``worker`` (several workers), then ``fields``."""
        head = b'{"time":"' + self._clock.now().encode() + b'",' + self._worker
        self.put_line(head + orjson.dumps(fields)[1:] + b"\n")

    def put_line(self, line: bytes) -> None:
        self._held.append(line)
        self._size += len(line)
        if self._size >= MAX_HELD_BYTES:
            self.flush()
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to flush it later: now
            self.flush()
            return
        # a callback of a loop that has since closed never runs: one of this loop replaces it
        if self._timer is None or self._timer_loop is not loop:
            self._timer = loop.call_soon(self._due)
            self._timer_loop = loop

    def _due(self) -> None:
        self._timer = None
        self.flush()

    def flush(self) -> None:
        if not self._held:
            return
        data = b"".join(self._held)
        self._held.clear()
        self._size = 0
        try:
            if self._fd is None:
                self._stream.write(data.decode())
                self._stream.flush()
                return
            for piece in whole_line_writes(data):
                view = memoryview(piece)
                while view:
                    view = view[os.write(self._fd, view) :]
        except (OSError, ValueError):
            if logging.raiseExceptions:  # as logging.Handler.handleError does
                traceback.print_exc(file=sys.stderr)


class AccessHandler(logging.Handler):
    """The access logger's handler once configured: :func:`log_exchange` hands its lines
    straight to ``writer``; a record logged to that logger otherwise is formatted as JSON and
    held the same way. ``flush`` (``logging.shutdown`` calls it at exit) writes what is held."""

    def __init__(self, stream: IO[str], worker: int = 0) -> None:
        super().__init__()
        self.writer = AccessWriter(stream, worker)
        self.setFormatter(JsonAccessFormatter(worker))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.writer.put_line(self.format(record).encode() + b"\n")
        except Exception:
            self.handleError(record)

    def flush(self) -> None:
        self.writer.flush()


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
    for old in list(access_log.handlers):
        if not worker:  # a worker's copy of the supervisor's holds nothing of its own
            old.flush()
        access_log.removeHandler(old)
    access_log.addHandler(AccessHandler(stream if stream is not None else sys.stderr, worker))
    access_log.propagate = False


def flush_access_log() -> None:
    """Write the access lines held now (a graceful stop calls it; so does logging.shutdown)."""
    for handler in access_log.handlers:
        handler.flush()
