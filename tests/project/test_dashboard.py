"""deploy/grafana/toolcall-proxy.json (issue 28 item 5): every query names metrics the proxy
exports, with labels those metrics have.

Grafana cannot run here, so the dashboard is held against a real scrape: the real proxy app
in front of a real upstream answers a rewritten stream that needs repairs and reports usage,
and its ``/-/metrics`` (the text format, as Prometheus reads it) says which series exist and
with which labels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from prometheus_client import Counter, Histogram
from prometheus_client.parser import text_string_to_metric_families

from proxy.settings import UpstreamSettings
from proxy.shell.metrics import METRICS
from tests.conftest import UPSTREAM_FIXTURES, StartProxy, StartUpstream, upstream_url
from tests.support.dockerfile import DEPLOY
from tests.support.upstreams import replay_app

DASHBOARD = DEPLOY / "grafana" / "toolcall-proxy.json"
FIXTURE = "llamacpp-b5494-one-tool-call"
#: what a query names that is not a metric: PromQL's functions, aggregations and keywords,
#: and Grafana's variables
NOT_METRICS = frozenset(
    {
        "sum",
        "rate",
        "increase",
        "changes",
        "histogram_quantile",
        "by",
        "without",
        "le",
    }
)
_NAME = re.compile(r"(?<![\w$\"'.{=~])([a-zA-Z_:][\w:]*)(?=\s*[\[{(),]|\s*$|\s)")
_STRINGS = re.compile(r'"[^"]*"')
_BRACES = re.compile(r"\{[^}]*\}")
_BY = re.compile(r"\bby\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*([\w:]+)\s*,\s*(\w+)\s*\)")
_MATCHERS = re.compile(r"(\w+)\s*(?:=~|!~|!=|=)")


def _queries(node: Any) -> Iterator[str]:
    """Every PromQL expression of the dashboard: panel targets, variables, annotations."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            elif key == "query" and isinstance(value, dict) and "query" in value:
                yield value["query"]
            else:
                yield from _queries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _queries(item)


def _promql(query: str) -> str:
    """Grafana's ``label_values(metric, label)`` as the selector it stands for."""
    return _LABEL_VALUES.sub(r'\1{\2=""}', query)


def metric_names(query: str) -> set[str]:
    """The metric names in a query (its label matchers, strings and numbers left out)."""
    bare = _BRACES.sub(" ", _STRINGS.sub('""', _promql(query)))
    bare = _BY.sub(" ", bare)
    names = {m.group(1) for m in _NAME.finditer(bare)}
    return {n for n in names if n not in NOT_METRICS and not n.startswith("$")}


def labels_used(query: str) -> set[str]:
    """The label names a query groups by or matches on."""
    query = _promql(query)
    used = {label.strip() for group in _BY.findall(query) for label in group.split(",")}
    for matchers in _BRACES.findall(query):
        used |= set(_MATCHERS.findall(matchers))
    return {label for label in used if label}


async def _exported(start_upstream: StartUpstream, start_proxy: StartProxy) -> dict[str, set[str]]:
    """Series name -> its label names, from a real scrape after a repaired stream."""
    body = (UPSTREAM_FIXTURES / f"{FIXTURE}.sse").read_bytes()
    meta = json.loads((UPSTREAM_FIXTURES / f"{FIXTURE}.meta.json").read_text())
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(UpstreamSettings(name="llama", url=upstream_url(upstream)))
    resp = await proxy.post("/v1/chat/completions", json=meta["request"])
    assert resp.status == 200
    await resp.read()
    text = await (await proxy.get("/-/metrics")).text()
    # a family no request of this test reached has no samples: its series' names by its type,
    # its labels as the metric declares them
    assert proxy.app is not None
    metrics = proxy.app[METRICS]
    declared = {
        m._name: set(m._labelnames)
        for m in vars(metrics).values()
        if isinstance(m, Counter | Histogram)
    }
    exported: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for suffix in _SERIES.get(family.type, ("",)):
            exported.setdefault(family.name + suffix, set()).update(declared.get(family.name, ()))
        for sample in family.samples:
            exported.setdefault(sample.name, set()).update(sample.labels)
    return exported


_SERIES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count")}


def test_the_query_reader_sees_names_and_labels() -> None:
    query = (
        'histogram_quantile(0.99, sum by (le, upstream) (rate(toolcall_proxy_x_bucket{upstream=~"$u",'
        ' status="5.."}[$__rate_interval]))) / sum(rate(process_cpu_seconds_total[5m]))'
    )
    assert metric_names(query) == {"toolcall_proxy_x_bucket", "process_cpu_seconds_total"}
    assert labels_used(query) == {"le", "upstream", "status"}
    assert metric_names("label_values(toolcall_proxy_y_total, model)") == {"toolcall_proxy_y_total"}
    assert labels_used("label_values(toolcall_proxy_y_total, model)") == {"model"}


async def test_every_query_names_exported_metrics_with_their_labels(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exported = await _exported(start_upstream, start_proxy)
    queries = list(_queries(dashboard))
    assert len(queries) >= 15
    for query in queries:
        names = metric_names(query)
        assert names, f"no metric in {query!r}"
        unknown = names - set(exported)
        assert not unknown, f"{query!r} names {unknown}, which the proxy does not export"
        # a label some series of the query has (le: a histogram's buckets; worker, instance:
        # the merge's and Prometheus' own)
        known = set().union(*(exported[n] for n in names)) | {"le", "worker", "instance", "job"}
        assert labels_used(query) <= known, f"{query!r} uses labels {labels_used(query) - known}"


def test_the_dashboard_covers_what_the_issue_asks() -> None:
    """Requests and status by upstream and replica, TTFB and duration quantiles, streams open,
    repairs by kind, tokens by model, ejections, reloads."""
    queries = "\n".join(_queries(json.loads(DASHBOARD.read_text())))
    for needed in (
        "sum by (upstream, status) (rate(toolcall_proxy_requests_total",
        "toolcall_proxy_time_to_first_byte_seconds_bucket",
        "toolcall_proxy_request_duration_seconds_bucket",
        "toolcall_proxy_streams_open",
        "sum by (upstream, kind, side) (rate(toolcall_proxy_repairs_total",
        "sum by (model, kind) (rate(toolcall_proxy_tokens_total",
        "sum by (result) (increase(toolcall_proxy_config_reloads_total",
        "sum by (upstream, replica) (rate(toolcall_proxy_replica_requests_total",
        "sum by (upstream, replica) (toolcall_proxy_replica_in_flight",
        "sum by (upstream, replica, kind) (rate(toolcall_proxy_replica_failures_total",
        "sum by (upstream, replica) (increase(toolcall_proxy_replica_ejections_total",
        "sum by (upstream, reason) (increase(toolcall_proxy_retries_total",
    ):
        assert needed in queries, needed
