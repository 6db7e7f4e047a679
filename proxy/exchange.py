"""The record of one proxied request, filled in by the shell as it goes, read once at the end.

The access-log middleware creates it and, when the request ends however it ends, hands it to
the metrics and the access log. Handlers only set fields; nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter
from typing import Final

from aiohttp import web

from proxy.meter import StreamMeter
from proxy.normalize import StreamNormalizer

NO_UPSTREAM: Final = "(none)"  # the request ended before it was routed (400, 404, 413, ...)


@dataclass(slots=True, eq=False)  # identity equality: kept in a set while in flight
class Exchange:
    request_id: str
    method: str
    path: str
    started_at: float  # perf_counter()
    upstream: str = NO_UPSTREAM
    model: str | None = None
    status: int | None = None
    streaming: bool = False  # an event-stream response was started (and counted as open)
    rewritten: bool = False
    end: str | None = None  # how the response body ended: complete, dropped, idle_timeout, ...
    meter: StreamMeter = field(default_factory=StreamMeter)
    # The stream's rewriter: its ``repairs`` (kind -> count) and ``extracted`` (dialect -> tool
    # calls recovered from text) counters are read at the end, so that a stream the client
    # abandons still counts what was already done.
    rewriter: object | None = None
    # The same for a response rewritten whole (not streamed).
    repairs: Counter[str] = field(default_factory=Counter)
    extracted: Counter[str] = field(default_factory=Counter)
    upstream_errors: list[tuple[str, str]] = field(default_factory=list)  # (upstream, kind)

    def upstream_failed(self, upstream: str, kind: str) -> None:
        self.upstream_errors.append((upstream, kind))

    def response_started(
        self, status: int, *, streaming: bool, rewriter: StreamNormalizer | None
    ) -> None:
        self.meter.client_headers_at = perf_counter()
        self.status = status
        self.streaming = streaming
        self.rewriter = rewriter
        self.rewritten = rewriter is not None
        if status >= 500:
            self.upstream_failed(self.upstream, "http_5xx")

    def completion_rewritten(self, status: int, repairs: Counter[str]) -> None:
        """A whole (non-streamed) completion was read, repaired and answered in one piece."""
        self.response_started(status, streaming=False, rewriter=None)
        self.rewritten = True
        self.repairs.update(repairs)
        self.end = "complete"

    def body_ended(self, end: str) -> None:
        self.end = end
        if end != "complete":
            self.upstream_failed(self.upstream, end)

    def all_repairs(self) -> Counter[str]:
        return self.repairs + _counter(self.rewriter, "repairs")

    def all_extracted(self) -> Counter[str]:
        return self.extracted + _counter(self.rewriter, "extracted")


def _counter(rewriter: object, name: str) -> Counter[str]:
    counts = getattr(rewriter, name, None)
    return Counter(counts) if isinstance(counts, Mapping) else Counter()


EXCHANGE = web.RequestKey("exchange", Exchange)
