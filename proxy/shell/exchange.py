"""The record of one proxied request, filled in by the shell as it goes, read once at the end.

The access-log middleware creates it and, when the request ends however it ends, hands it to
the metrics and the access log. Handlers only set fields; nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from time import perf_counter
from typing import Final, Protocol

from aiohttp import web

from proxy.core.streams import Tokens, UsageSeen
from proxy.shell.meter import StreamMeter


class Repairing(Protocol):
    """What rewrote a stream (a chat normalizer, a native protocol stream): its count of
    repairs by kind (proxy.core.repairs), read at the end."""

    @property
    def repairs(self) -> Counter[str]: ...


# Not served by one upstream: refused before routing (400, 404, 413, ...) or GET /v1/models,
# which asks them all.
NO_UPSTREAM: Final = "(none)"


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
    # The stream's normalizer: its ``repairs`` (kind -> count, proxy.core.repairs) are read at the
    # end, so that a stream the client abandons still counts what was already done.
    repair_source: Repairing | None = None
    repairs: Counter[str] = field(default_factory=Counter)  # of a completion rewritten whole
    # the request's own repairs (proxy/core/request_repairs/), made before it went upstream
    request_repairs: Counter[str] = field(default_factory=Counter)
    upstream_errors: list[tuple[str, str]] = field(default_factory=list)  # (upstream, kind)
    # the tokens the upstream reported (issue 28 item 4): a whole answer's, or read at the
    # end from what its rewritten stream saw
    tokens: Tokens | None = None
    usage: UsageSeen | None = None
    replica: str | None = None  # the URL of the replica that served (the last attempt's)
    attempts: int = 0  # requests sent upstream for it (retries: attempts - 1)

    def upstream_failed(self, upstream: str, kind: str) -> None:
        self.upstream_errors.append((upstream, kind))

    def response_started(
        self, status: int, *, streaming: bool, repair_source: Repairing | None
    ) -> None:
        self.meter.client_headers_at = perf_counter()
        self.status = status
        self.streaming = streaming
        self.repair_source = repair_source
        self.rewritten = repair_source is not None
        if status >= 500:
            self.upstream_failed(self.upstream, "http_5xx")

    def completion_rewritten(self, status: int, repairs: Counter[str]) -> None:
        """A whole (non-streamed) completion was read, repaired and answered in one piece."""
        self.response_started(status, streaming=False, repair_source=None)
        self.rewritten = True
        self.repairs.update(repairs)
        self.end = "complete"

    def body_ended(self, end: str) -> None:
        self.end = end
        # a stalled client is not the upstream's failure, nor a rewrite that failed
        if end not in ("complete", "client_stalled", "rewrite_failed"):
            self.upstream_failed(self.upstream, end)

    def reported_tokens(self) -> Tokens | None:
        """The upstream's token counts, read once (the metrics and the access line ask)."""
        if self.usage is not None:
            self.tokens, self.usage = self.usage.tokens(), None
        return self.tokens

    def all_repairs(self) -> Counter[str]:
        """Every repair of the exchange, to read (not to change): the metrics and the access
        line ask for it on every request, most of which have none, so a counter is only made
        when there are two to add up."""
        if self.repair_source is None or not self.repair_source.repairs:
            return self.repairs
        if not self.repairs:
            return self.repair_source.repairs
        return self.repairs + self.repair_source.repairs


EXCHANGE = web.RequestKey("exchange", Exchange)
