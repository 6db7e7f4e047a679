"""The merge behind ``/-/metrics`` with several workers, on real registries' expositions."""

from __future__ import annotations

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from proxy.shell.fleet_metrics import _generate_openmetrics, _Merged, merge
from proxy.shell.metrics import Metrics


def exposition(metrics: Metrics) -> str:
    return _generate_openmetrics(metrics.registry).decode()


def merged_samples(*workers: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged(merge([(n, exposition(m)) for n, m in enumerate(workers, 1)])))
    text = generate_latest(registry).decode()  # what a Prometheus scraper gets
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_counters_and_histograms_are_summed_per_label_set() -> None:
    one, two = Metrics(["u"]), Metrics(["u"])
    one.requests.labels("u", "m", "/v1/chat/completions", "200").inc(3)
    two.requests.labels("u", "m", "/v1/chat/completions", "200").inc(4)
    two.requests.labels("u", "m", "/v1/chat/completions", "502").inc()
    one.headers_added.labels("u").observe(0.01)
    two.headers_added.labels("u").observe(0.001)
    samples = merged_samples(one, two)
    ok = (("model", "m"), ("route", "/v1/chat/completions"), ("status", "200"), ("upstream", "u"))
    failed = (*ok[:2], ("status", "502"), ("upstream", "u"))
    assert samples["toolcall_proxy_requests_total", ok] == 7
    assert samples["toolcall_proxy_requests_total", failed] == 1
    bucket = "toolcall_proxy_headers_added_seconds_bucket"
    assert samples[bucket, (("le", "0.001"), ("upstream", "u"))] == 1
    assert samples[bucket, (("le", "0.01"), ("upstream", "u"))] == 2
    assert samples["toolcall_proxy_headers_added_seconds_count", (("upstream", "u"),)] == 2
    assert samples["toolcall_proxy_headers_added_seconds_sum", (("upstream", "u"),)] == 0.011


def test_a_counters_created_time_is_the_earliest_not_a_sum() -> None:
    one, two = Metrics(["u"]), Metrics(["u"])
    for metrics in (one, two):
        metrics.requests.labels("u", "m", "/v1/models", "200").inc()
    samples = merged_samples(one, two)
    labels = (("model", "m"), ("route", "/v1/models"), ("status", "200"), ("upstream", "u"))
    created = [
        s.value
        for m in (one, two)
        for f in text_string_to_metric_families(generate_latest(m.registry).decode())
        for s in f.samples
        if s.name == "toolcall_proxy_requests_created"
    ]
    assert samples["toolcall_proxy_requests_created", labels] == min(created)


def test_per_process_series_are_kept_apart_with_a_worker_label() -> None:
    samples = merged_samples(Metrics(["u"]), Metrics(["u"]))
    cpu = {dict(labels).get("worker") for name, labels in samples if name.startswith("process_")}
    assert cpu == {"1", "2"}
    info = [dict(labels)["worker"] for name, labels in samples if name == "python_info"]
    assert sorted(info) == ["1", "2"]
    assert ("toolcall_proxy_streams_open", (("upstream", "u"),)) in samples  # summed, unlabelled


def test_a_retired_workers_final_counts_stay_but_not_its_gauges_or_process() -> None:
    """issue 28 item 3: a worker a reload retired leaves its counters and histograms in the
    totals (so they never go down); its gauges and per-process series ended with it."""
    live, retired = Metrics(["u"]), Metrics(["u"])
    live.requests.labels("u", "m", "/v1/models", "200").inc(2)
    retired.requests.labels("u", "m", "/v1/models", "200").inc(5)
    retired.headers_added.labels("u").observe(0.01)
    retired.config_loaded("oldhash")
    live.config_loaded("newhash")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Merged(merge([(1, exposition(live))], [exposition(retired)])))
    text = generate_latest(registry).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    labels = (("model", "m"), ("route", "/v1/models"), ("status", "200"), ("upstream", "u"))
    assert samples["toolcall_proxy_requests_total", labels] == 7
    assert samples["toolcall_proxy_headers_added_seconds_count", (("upstream", "u"),)] == 1
    assert samples["toolcall_proxy_config_info", (("hash", "newhash"),)] == 1
    assert ("toolcall_proxy_config_info", (("hash", "oldhash"),)) not in samples
    workers = {
        dict(labels).get("worker") for (name, labels) in samples if name.startswith("process_")
    }
    assert workers == {"1"}
