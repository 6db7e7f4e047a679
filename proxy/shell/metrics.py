"""Prometheus metrics, one registry per app, served at ``GET /-/metrics``.

Each app owns a CollectorRegistry (never prometheus-client's global one), so several apps in
one process, as in the tests, count apart. Everything about a request is recorded once, when it
ends (:meth:`Metrics.end`); the streaming path only fills a StreamMeter. ``streams_open`` is
counted at scrape time from the requests in flight.

Label values are bounded so that clients cannot grow the series without limit:
* ``upstream`` is a configured upstream name, ``route`` one of the API paths in ``ROUTES`` or
  ``other``, ``status`` an HTTP status, ``kind`` and ``dialect`` names from the proxy's own code.
* ``model`` is the request's model name only once an upstream has accepted it (a 2xx or 3xx
  answer), and only for the first ``MAX_MODEL_LABELS`` such names this process sees; other
  names count as ``(other)``, requests without a model as ``(none)``. An upstream that accepts
  any model name (llama-server does) therefore spends at most that many labels.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate
from typing import Any, Final, TypeVar, cast

from aiohttp import hdrs, web
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from proxy.core.repairs import Repair
from proxy.shell.exchange import Exchange

_M = TypeVar("_M", Counter, Gauge, Histogram)

MAX_MODEL_LABELS: Final = 32
NO_MODEL: Final = "(none)"
OTHER_MODEL: Final = "(other)"
MAX_MODEL_LABEL_LENGTH: Final = 128

# API paths worth a label of their own (OpenAI's, and the native ones of llama-server, vLLM,
# Ollama and TGI); anything else a client sends is counted as "other".
ROUTES: Final = frozenset(
    {
        "/v1/chat/completions",
        "/v1/completions",
        "/v1/responses",
        "/v1/embeddings",
        "/v1/models",
        "/v1/rerank",
        "/v1/score",
        "/v1/audio/transcriptions",
        "/v1/audio/translations",
        "/v1/audio/speech",
        "/v1/images/generations",
        "/v1/moderations",
        "/chat/completions",
        "/completions",
        "/completion",
        "/embedding",
        "/embeddings",
        "/infill",
        "/rerank",
        "/tokenize",
        "/detokenize",
        "/apply-template",
        "/props",
        "/slots",
        "/health",
        "/metrics",
        "/version",
        "/generate",
        "/generate_stream",
        "/api/chat",
        "/api/generate",
        "/api/tags",
        "/api/embed",
    }
)
OTHER_ROUTE: Final = "other"

# The proxy's own latency is microseconds when it passes bytes through and can reach seconds
# when a coalesced tool call is held whole; the buckets cover both ends.
LATENCY_BUCKETS: Final = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    10.0,
)


# A request's whole time and its time to first byte, as a client sees them: milliseconds for
# an error of the proxy's own, minutes for a long generation or a long prompt to process.
REQUEST_BUCKETS: Final = (
    0.005,
    0.025,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
)


def route_label(path: str) -> str:
    return path if path in ROUTES else OTHER_ROUTE


class ModelLabels:
    """The bounded set of model names used as label values (see the module docstring)."""

    def __init__(self, cap: int = MAX_MODEL_LABELS) -> None:
        self._cap = cap
        self._known: set[str] = set()

    def label(self, model: str | None, *, accepted: bool) -> str:
        if model is None:
            return NO_MODEL
        if model in self._known:
            return model
        if accepted and len(self._known) < self._cap and len(model) <= MAX_MODEL_LABEL_LENGTH:
            self._known.add(model)
            return model
        return OTHER_MODEL


class _OpenStreams(Collector):
    """``streams_open``, counted from the requests in flight when scraped.

    A gauge moved by hand would need a decrement on every way a stream can end (cancelled by
    a client that left included); counting the live requests cannot drift.
    """

    def __init__(self, live: set[Exchange], upstreams: Iterable[str]) -> None:
        self._live = live
        self._upstreams = tuple(upstreams)

    def describe(self) -> Iterator[Metric]:
        yield self._family()

    def collect(self) -> Iterator[Metric]:
        family = self._family()
        counts = dict.fromkeys(self._upstreams, 0)
        for exchange in self._live:
            if exchange.streaming:
                counts[exchange.upstream] = counts.get(exchange.upstream, 0) + 1
        for upstream, count in counts.items():
            family.add_metric([upstream], count)
        yield family

    @staticmethod
    def _family() -> GaugeMetricFamily:
        return GaugeMetricFamily(
            "toolcall_proxy_streams_open",
            "Event-stream responses being forwarded now.",
            labels=["upstream"],
        )


# prometheus-client's own spelling of "le" values (0.1, 10.0, +Inf); it ships without types.
_go_float = cast(Callable[[float], str], floatToGoString)


class BatchHistogram(Collector):
    """A histogram that takes a whole stream's observations at once, per label value.

    prometheus-client's Histogram takes a lock per observation; a stream's per-read times are
    many, so they are binned here into plain counts in one pass when the stream ends.
    """

    def __init__(self, name: str, documentation: str, label: str, buckets: Sequence[float]) -> None:
        self._name = name
        self._documentation = documentation
        self._label = label
        self._bounds = (*buckets, float("inf"))
        self._les = [_go_float(b) for b in self._bounds]
        self._series: dict[str, tuple[list[int], list[float]]] = {}  # counts per bucket, sum

    def add(self, label_value: str, values: Sequence[float]) -> None:
        counts, total = self._series.setdefault(label_value, ([0] * len(self._bounds), [0.0]))
        for value in values:
            counts[bisect_left(self._bounds, value)] += 1  # "le": the first bound >= value
        total[0] += sum(values)

    def describe(self) -> Iterator[Metric]:
        yield HistogramMetricFamily(self._name, self._documentation, labels=[self._label])

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=[self._label])
        for label_value, (counts, total) in self._series.items():
            cumulative = zip(self._les, accumulate(counts), strict=True)
            family.add_metric([label_value], [(le, float(n)) for le, n in cumulative], total[0])
        yield family


class Metrics:
    def __init__(self, upstreams: Iterable[str]) -> None:
        self.registry = registry = CollectorRegistry()
        ProcessCollector(registry=registry)
        PlatformCollector(registry=registry)
        GCCollector(registry=registry)
        self.models = ModelLabels()
        self._children: dict[tuple[Counter | Gauge | Histogram, tuple[str, ...]], object] = {}
        self._upstreams: dict[str, _UpstreamSeries] = {}  # resolved once per upstream
        self.requests = Counter(
            "toolcall_proxy_requests",
            "Proxied requests, counted when they end.",
            ["upstream", "model", "route", "status"],
            registry=registry,
        )
        self.live: set[Exchange] = set()  # requests in flight, read at scrape time
        registry.register(_OpenStreams(self.live, upstreams))
        self.repairs = Counter(
            "toolcall_proxy_repairs",
            "Repairs applied, by kind (the quirk catalog's short names) and side: the"
            " response's stream (side=response) or the request sent upstream (side=request).",
            ["upstream", "model", "kind", "side"],
            registry=registry,
        )
        self.translate_dropped = Counter(
            "toolcall_proxy_translate_dropped",
            "Request fields and tools a translated request dropped (a chat upstream cannot"
            " take them), by client protocol and field.",
            ["protocol", "field"],
            registry=registry,
        )
        self.text_tool_calls = Counter(
            "toolcall_proxy_text_tool_calls",
            "Tool calls recovered from markup in the text, by dialect.",
            ["upstream", "model", "dialect"],
            registry=registry,
        )
        self.args_schema_mismatches = Counter(
            "toolcall_proxy_args_schema_mismatches",
            "Tool calls whose arguments did not fit their tool's schema (detected, passed on"
            " unchanged), by kind: unknown-tool, required, unknown-property, type, enum, other.",
            ["upstream", "model", "kind"],
            registry=registry,
        )
        self.bytes = Counter(
            "toolcall_proxy_response_bytes",
            "Response body bytes, as read from the upstream (received) and written (sent).",
            ["upstream", "direction"],
            registry=registry,
        )
        self.chunks = Counter(
            "toolcall_proxy_response_chunks",
            "Response body writes to clients: one per upstream read when passed through, one"
            " per read that released bytes when rewritten.",
            ["upstream"],
            registry=registry,
        )
        self.headers_added = Histogram(
            "toolcall_proxy_headers_added_seconds",
            "From the upstream's response headers to the client's.",
            ["upstream"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.first_byte_added = Histogram(
            "toolcall_proxy_first_byte_added_seconds",
            "From the upstream's first body bytes to the first body bytes written to the client.",
            ["upstream", "rewritten"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.chunk_processing = BatchHistogram(
            "toolcall_proxy_chunk_processing_seconds",
            "Decoding and rewriting time per upstream read of a rewritten stream.",
            "upstream",
            LATENCY_BUCKETS,
        )
        registry.register(self.chunk_processing)
        self.duration = Histogram(
            "toolcall_proxy_request_duration_seconds",
            "Proxied requests from received to finished (the access line's duration_ms).",
            ["upstream"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.ttfb = Histogram(
            "toolcall_proxy_time_to_first_byte_seconds",
            "Proxied requests from received to their first body byte sent (ttfb_ms).",
            ["upstream"],
            buckets=REQUEST_BUCKETS,
            registry=registry,
        )
        self.tokens = Counter(
            "toolcall_proxy_tokens",
            "Tokens the upstream reported in its usage, by kind: prompt, completion,"
            " reasoning, cached (nothing estimated; an answer without usage counts none).",
            ["upstream", "model", "kind"],
            registry=registry,
        )
        self.config_reloads = Counter(
            "toolcall_proxy_config_reloads",
            "Configuration reloads on SIGHUP, by result: applied, or invalid (the running"
            " configuration kept).",
            ["result"],
            registry=registry,
        )
        self.config = Gauge(
            "toolcall_proxy_config_info",
            "The configuration a process serves, by its hash (with several workers: how many"
            " serve it).",
            ["hash"],
            registry=registry,
        )
        self.upstream_errors = Counter(
            "toolcall_proxy_upstream_errors",
            "Upstream failures by kind: unreachable, connect_timeout, first_byte_timeout,"
            " invalid_response, dropped, idle_timeout, http_5xx.",
            ["upstream", "kind"],
            registry=registry,
        )
        # replicas (upstreams[].urls; a single url is a replica too): label values are
        # configured names and URLs
        self.replica_requests = Counter(
            "toolcall_proxy_replica_requests",
            "Attempts sent to a replica (a retried request counts on each replica it tried).",
            ["upstream", "replica"],
            registry=registry,
        )
        self.replica_failures = Counter(
            "toolcall_proxy_replica_failures",
            "Attempts that failed before the response head counted against a replica's"
            " health: unreachable (refused, or reset before the head), connect_timeout,"
            " http_5xx (502/503/504).",
            ["upstream", "replica", "kind"],
            registry=registry,
        )
        self.replica_ejections = Counter(
            "toolcall_proxy_replica_ejections",
            "Times a replica was taken out of the rotation for a back-off.",
            ["upstream", "replica"],
            registry=registry,
        )
        self.replica_in_flight = Gauge(
            "toolcall_proxy_replica_in_flight",
            "Requests a replica is serving now, from the attempt to the response's end.",
            ["upstream", "replica"],
            registry=registry,
        )
        self.retries = Counter(
            "toolcall_proxy_retries",
            "Requests sent again before their first byte, by the reason of the failed attempt.",
            ["upstream", "reason"],
            registry=registry,
        )

    def config_loaded(self, digest: str) -> None:
        """The process serves the configuration of this hash now (at start, on a reload)."""
        self.config.clear()
        self.config.labels(digest).set(1)

    def _child(self, metric: _M, *labels: str) -> _M:
        """``metric.labels(*labels)`` from a dict: ``labels`` validates and takes a lock on each
        call, and every request ends with half a dozen. Label values are bounded (see the
        module's docstring), and so is this dict."""
        key = (metric, labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return cast("_M", child)

    def dropped(self, protocol: str, fields: Iterable[str]) -> None:
        """Count what a translated request dropped; the names come from the protocol's own
        closed vocabulary (proxy/core/protocols/responses/dropped.py)."""
        for name in fields:
            self._child(self.translate_dropped, protocol, name).inc()

    def attempt(self, upstream: str, replica: str, *, began: bool) -> None:
        """An attempt on a replica began (``began``) or ended."""
        if began:
            self._child(self.replica_requests, upstream, replica).inc()
            self._child(self.replica_in_flight, upstream, replica).inc()
        else:
            self._child(self.replica_in_flight, upstream, replica).dec()

    def replica_failed(self, upstream: str, replica: str, kind: str, *, ejected: bool) -> None:
        self._child(self.replica_failures, upstream, replica, kind).inc()
        if ejected:
            self.replica_ejected(upstream, replica)

    def replica_ejected(self, upstream: str, replica: str) -> None:
        self._child(self.replica_ejections, upstream, replica).inc()

    def retried(self, upstream: str, reason: str) -> None:
        self._child(self.retries, upstream, reason).inc()

    def begin(self, exchange: Exchange) -> None:
        self.live.add(exchange)

    def _of_upstream(self, upstream: str) -> _UpstreamSeries:
        series = self._upstreams.get(upstream)
        if series is None:
            series = self._upstreams[upstream] = _UpstreamSeries(self, upstream)
        return series

    def end(self, exchange: Exchange, now: float) -> None:
        """Record one ended request (``now``: perf_counter() at its end, the access line's)."""
        self.live.discard(exchange)
        upstream, meter = exchange.upstream, exchange.meter
        status = exchange.status if exchange.status is not None else 0
        model = self.models.label(exchange.model, accepted=0 < status < 400)
        series = self._of_upstream(upstream)
        route = route_label(exchange.path)
        requests = series.requests.get((model, route, status))
        if requests is None:
            requests = series.requests[(model, route, status)] = self.requests.labels(
                upstream, model, route, str(status)
            )
        requests.inc()
        if exchange.repair_source is not None or exchange.repairs or exchange.request_repairs:
            self._repairs(exchange, upstream, model)
        series.child(_DURATION).observe(now - exchange.started_at)
        if meter.first_out_at is not None:
            series.child(_TTFB).observe(meter.first_out_at - exchange.started_at)
        if (tokens := exchange.reported_tokens()) is not None:
            for kind, count in tokens.reported():
                self._child(self.tokens, upstream, model, kind).inc(count)
        for failed, kind in exchange.upstream_errors:
            self._child(self.upstream_errors, failed, kind).inc()
        if meter.bytes_in:
            series.child(_RECEIVED).inc(meter.bytes_in)
        if meter.bytes_out:
            series.child(_SENT).inc(meter.bytes_out)
            series.child(_CHUNKS).inc(meter.writes)
        if (added := meter.headers_added()) is not None:
            series.child(_HEADERS_ADDED).observe(added)
        if (added := meter.first_byte_added()) is not None:
            series.child(_FIRST_REWRITTEN if exchange.rewritten else _FIRST_PASSED).observe(added)
        if meter.processing:
            self.chunk_processing.add(upstream, meter.processing)

    def _repairs(self, exchange: Exchange, upstream: str, model: str) -> None:
        child = self._child
        for kind, count in exchange.all_repairs().items():
            # A call recovered from text is counted as "markup-in-content:<dialect>".
            kind, _, dialect = kind.partition(":")
            child(self.repairs, upstream, model, kind, "response").inc(count)
            if kind == Repair.MARKUP_IN_CONTENT:
                child(self.text_tool_calls, upstream, model, dialect or "unknown").inc(count)
            elif kind == Repair.ARGS_SCHEMA_MISMATCH:  # "args-schema-mismatch:<kind>" alike
                child(self.args_schema_mismatches, upstream, model, dialect or "other").inc(count)
        for kind, count in exchange.request_repairs.items():
            child(self.repairs, upstream, model, kind, "request").inc(count)


# The series every request of an upstream may touch, by slot (_UpstreamSeries.child): the
# metric's attribute on Metrics and the label values after ``upstream``.
_DURATION, _TTFB, _RECEIVED, _SENT, _CHUNKS, _HEADERS_ADDED, _FIRST_PASSED, _FIRST_REWRITTEN = (
    range(8)
)
_SLOTS: Final = (
    ("duration", ()),
    ("ttfb", ()),
    ("bytes", ("received",)),
    ("bytes", ("sent",)),
    ("chunks", ()),
    ("headers_added", ()),
    ("first_byte_added", ("no",)),
    ("first_byte_added", ("yes",)),
)


class _UpstreamSeries:
    """One upstream's children of the per-request metrics, each resolved at its first use
    (so the exposition holds the series it did when each was looked up per request), then
    kept: ``labels()`` validates its values and takes a lock on every call."""

    __slots__ = ("_children", "_metrics", "_upstream", "requests")

    def __init__(self, metrics: Metrics, upstream: str) -> None:
        self._metrics = metrics
        self._upstream = upstream
        self._children: list[Any] = [None] * len(_SLOTS)
        # by (model label, route label, status): the request counter's children
        self.requests: dict[tuple[str, str, int], Counter] = {}

    def child(self, slot: int) -> Any:
        found = self._children[slot]
        if found is None:
            name, labels = _SLOTS[slot]
            metric = getattr(self._metrics, name)
            found = self._children[slot] = metric.labels(self._upstream, *labels)
        return found


METRICS = web.AppKey("metrics", Metrics)


async def handle_metrics(request: web.Request) -> web.Response:
    # The format follows the scraper's Accept header (Prometheus text or OpenMetrics).
    encode, content_type = choose_encoder(request.headers.get(hdrs.ACCEPT, ""))
    body = encode(request.app[METRICS].registry)
    # The content type carries its own charset parameter, so it goes in as a raw header.
    return web.Response(body=body, headers={hdrs.CONTENT_TYPE: content_type})
