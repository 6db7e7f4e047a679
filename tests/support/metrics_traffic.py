"""A fixed set of ended requests, recorded into a Metrics, and its exposition without what
varies between runs (the ``_created`` times, the process's own series): the golden file of
tests/shell/test_metrics_golden.py was written by the code before issue 29 item 2 from this
traffic, so the output stays the same series, in the same order, with the same values."""

from __future__ import annotations

from collections import Counter
from typing import Any

from prometheus_client import generate_latest
from prometheus_client.openmetrics.exposition import generate_latest as generate_openmetrics

from proxy.core.usage import Tokens
from proxy.shell.exchange import Exchange
from proxy.shell.metrics import Metrics

UPSTREAMS = ("llama", "vllm")
NOW = 1000.0  # the clock Metrics.end reads, fixed


def _exchange(i: int) -> Exchange:
    upstream = UPSTREAMS[i % 2] if i % 7 else "(none)"
    path = ("/v1/chat/completions", "/v1/responses", "/v1/models", "/odd/path")[i % 4]
    status = (200, 200, 200, 404, 502, 200, 499)[i % 7]
    exchange = Exchange(
        request_id=f"r{i}", method="POST", path=path, started_at=NOW - 0.001 * (i % 50)
    )
    exchange.upstream = upstream
    exchange.model = (None, "qwen", "llama-3", f"model-{i % 40}")[i % 4]
    exchange.status = status
    meter = exchange.meter
    if i % 5:
        meter.upstream_headers_at = NOW - 0.0009 * (i % 9)
        meter.client_headers_at = meter.upstream_headers_at + 0.00002 * (i % 11)
    if i % 3:
        meter.first_in_at = NOW - 0.0005 * (i % 13)
        meter.first_out_at = meter.first_in_at + 0.00001 * (i % 17)
        meter.bytes_in, meter.bytes_out, meter.writes = 100 + i, 90 + i, 1 + i % 6
        exchange.rewritten = bool(i % 2)
    if i % 4 == 1:
        meter.processing = [0.00001 * k for k in range(i % 6)]
    if i % 6 == 2:
        exchange.repairs = Counter({"name-repeated": 1, "markup-in-content:hermes": 2})
    if i % 9 == 4:
        exchange.repairs = Counter({"args-schema-mismatch:required": 1})
    if i % 8 == 3:
        exchange.request_repairs = Counter({"system-not-first": 1})
    if i % 5 == 2:
        exchange.tokens = Tokens(prompt=10 + i, completion=i % 7, cached=None)
    if i % 11 == 5:
        exchange.upstream_failed(upstream, "dropped")
    return exchange


def record(metrics: Metrics, count: int = 240) -> None:
    for i in range(count):
        exchange = _exchange(i)
        metrics.begin(exchange)
        # the golden files were written at ec28f34, whose end() read the clock itself
        # (perf_counter patched to NOW there)
        metrics.end(exchange, NOW)


def exposition(metrics: Metrics, openmetrics: bool = False) -> str:
    encode: Any = generate_openmetrics if openmetrics else generate_latest
    text: str = encode(metrics.registry).decode()
    own = (
        line
        for line in text.splitlines()
        if "toolcall_proxy_" in line and "_created" not in line and "config_info" not in line
    )
    return "\n".join(own) + "\n"
