"""Prometheus metrics at /-/metrics: what each request, stream and failure adds, and the bounds."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientPayloadError, web
from prometheus_client import CollectorRegistry, Histogram

from proxy.settings import UpstreamSettings
from proxy.shell.metrics import (
    LATENCY_BUCKETS,
    MAX_MODEL_LABELS,
    NO_MODEL,
    OTHER_MODEL,
    BatchHistogram,
    ModelLabels,
    route_label,
)
from tests.conftest import UPSTREAM_FIXTURES, StartProxy, StartUpstream, upstream_url
from tests.support.metrics import Proxy, scrape, value
from tests.support.streams import split_events
from tests.support.upstreams import replay_app, serve_writes

CHAT = "/v1/chat/completions"


async def eventually(proxy: Proxy, name: str, **labels: str) -> float:
    """The sample's value once it is there: a request is recorded just after its last byte."""
    for _ in range(100):
        found = value(await scrape(proxy), name, **labels)
        if found is not None:
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"no sample {name}{labels}")


async def test_metrics_live_under_the_own_prefix_and_upstream_metrics_pass_through(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def upstream_metrics(request: web.Request) -> web.Response:
        return web.Response(text="llamacpp:prompt_tokens_total 7\n")

    app = web.Application()
    app.router.add_get("/metrics", upstream_metrics)
    proxy = await start_proxy(await start_upstream(app))
    own = await proxy.get("/-/metrics")
    assert own.status == 200
    assert own.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    assert "toolcall_proxy_streams_open" in await own.text()
    theirs = await proxy.get("/metrics")
    assert await theirs.text() == "llamacpp:prompt_tokens_total 7\n"


async def test_a_passed_through_stream_counts_request_bytes_chunks_and_added_latency(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    body = (UPSTREAM_FIXTURES / "llamacpp-b9821-one-tool-call.sse").read_bytes()
    events = body.count(b"\n\n")
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="llama", url=upstream_url(upstream), normalize=False)
    )
    resp = await proxy.post(CHAT, json={"model": "qwen", "stream": True})
    assert await resp.read() == body

    requests = {"upstream": "llama", "model": "qwen", "route": CHAT, "status": "200"}
    assert await eventually(proxy, "toolcall_proxy_requests_total", **requests) == 1
    samples = await scrape(proxy)
    for direction in ("received", "sent"):
        bytes_ = value(
            samples, "toolcall_proxy_response_bytes_total", upstream="llama", direction=direction
        )
        assert bytes_ == len(body)
    chunks = value(samples, "toolcall_proxy_response_chunks_total", upstream="llama")
    assert chunks is not None
    assert 1 <= chunks <= events
    first_byte = value(
        samples, "toolcall_proxy_first_byte_added_seconds_count", upstream="llama", rewritten="no"
    )
    assert first_byte == 1
    assert value(samples, "toolcall_proxy_headers_added_seconds_count", upstream="llama") == 1
    # Passed through: nothing was decoded or rewritten, so no per-chunk processing is recorded.
    assert value(samples, "toolcall_proxy_chunk_processing_seconds_count", upstream="llama") is None


async def test_two_apps_keep_separate_registries(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = await start_upstream(replay_app(b"data: [DONE]\n\n"))
    busy = await start_proxy(upstream)
    idle = await start_proxy(upstream)
    await (await busy.post(CHAT, json={"model": "m", "stream": True})).read()
    labels = {"upstream": "up0", "model": "m", "route": CHAT, "status": "200"}
    assert await eventually(busy, "toolcall_proxy_requests_total", **labels) == 1
    assert value(await scrape(idle), "toolcall_proxy_requests_total", **labels) is None


async def test_own_endpoints_are_not_counted_as_requests(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(replay_app(b"")))
    for path in ("/-/health", "/-/metrics", "/-/metrics"):
        await proxy.get(path)
    samples = await scrape(proxy)
    assert not [key for key in samples if key[0] == "toolcall_proxy_requests_total"]


async def test_model_label_keeps_accepted_names_and_folds_rejected_ones(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def only_qwen(request: web.Request) -> web.Response:
        payload = await request.json() if request.content_type == "application/json" else {}
        if payload.get("model") != "qwen":
            return web.json_response({"error": {"message": "no such model"}}, status=404)
        return web.json_response({"choices": []})

    app = web.Application()
    app.router.add_post(CHAT, only_qwen)
    proxy = await start_proxy(await start_upstream(app))
    for model in ("qwen", "random-garbage-1", "random-garbage-2"):
        await (await proxy.post(CHAT, json={"model": model})).read()
    await (await proxy.post(CHAT, data=b"not json", headers={"Content-Type": "text/plain"})).read()
    await (await proxy.get("/some/unknown/path")).read()

    labels = {"upstream": "up0", "route": CHAT}
    assert (
        await eventually(
            proxy, "toolcall_proxy_requests_total", model=OTHER_MODEL, status="404", **labels
        )
        == 2
    )
    samples = await scrape(proxy)
    assert (
        value(samples, "toolcall_proxy_requests_total", model="qwen", status="200", **labels) == 1
    )
    assert (
        value(samples, "toolcall_proxy_requests_total", model=NO_MODEL, status="404", **labels) == 1
    )
    unknown_path = {"upstream": "up0", "model": NO_MODEL, "route": "other", "status": "404"}
    assert value(samples, "toolcall_proxy_requests_total", **unknown_path) == 1


def test_model_labels_stop_growing_at_the_cap() -> None:
    labels = ModelLabels(cap=2)
    assert labels.label("a", accepted=True) == "a"
    assert labels.label("b", accepted=False) == OTHER_MODEL
    assert labels.label("b", accepted=True) == "b"
    assert labels.label("c", accepted=True) == OTHER_MODEL
    assert labels.label("a", accepted=False) == "a"  # once known, always itself
    assert labels.label("x" * 1000, accepted=True) == OTHER_MODEL
    assert labels.label(None, accepted=True) == NO_MODEL
    assert MAX_MODEL_LABELS >= 8


@pytest.mark.parametrize(
    ("path", "label"),
    [
        (CHAT, CHAT),
        ("/v1/models", "/v1/models"),
        ("/v1/chat/completions/x", "other"),
        ("/props", "/props"),
    ],
)
def test_route_label_is_a_known_api_path_or_other(path: str, label: str) -> None:
    assert route_label(path) == label


async def test_streams_open_counts_live_event_streams_only(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    release = asyncio.Event()

    async def held(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[]}\n\n')
        await release.wait()
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post(CHAT, held)
    proxy = await start_proxy(await start_upstream(app))
    assert value(await scrape(proxy), "toolcall_proxy_streams_open", upstream="up0") == 0
    first = await proxy.post(CHAT, json={"model": "m", "stream": True})
    second = await proxy.post(CHAT, json={"model": "m", "stream": True})
    await first.content.readuntil(b"\n\n")
    await second.content.readuntil(b"\n\n")
    assert value(await scrape(proxy), "toolcall_proxy_streams_open", upstream="up0") == 2
    second.close()  # one client leaves mid-stream
    release.set()
    await first.read()
    for _ in range(100):
        if value(await scrape(proxy), "toolcall_proxy_streams_open", upstream="up0") == 0:
            break
        await asyncio.sleep(0.02)
    assert value(await scrape(proxy), "toolcall_proxy_streams_open", upstream="up0") == 0


async def test_upstream_failures_are_counted_by_kind(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    async def fail(request: web.Request) -> web.StreamResponse:
        how = request.match_info["how"]
        if how == "error":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if how == "slow":
            await asyncio.sleep(30)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[]}\n\n')
        if how == "drop":
            assert request.transport is not None
            request.transport.close()
        else:
            await asyncio.sleep(30)
        return response

    app = web.Application()
    app.router.add_post("/{how}", fail)
    upstream = await start_upstream(app)
    proxy = await start_proxy(upstream, timeouts={"first_byte": 0.3, "idle": 0.3})
    assert (await proxy.post("/error", json={"model": "m"})).status == 500
    assert (await proxy.post("/slow", json={"model": "m"})).status == 504
    for path in ("/drop", "/idle"):
        resp = await proxy.post(path, json={"model": "m", "stream": True})
        with pytest.raises(ClientPayloadError):
            await resp.read()

    errors = "toolcall_proxy_upstream_errors_total"
    for kind in ("http_5xx", "first_byte_timeout", "dropped", "idle_timeout"):
        assert await eventually(proxy, errors, upstream="up0", kind=kind) == 1, kind
    samples = await scrape(proxy)
    timeout = {"upstream": "up0", "model": OTHER_MODEL, "route": "other", "status": "504"}
    assert value(samples, "toolcall_proxy_requests_total", **timeout) == 1


async def test_an_unreachable_upstream_is_counted(start_proxy: StartProxy) -> None:
    from tests.support.sockets import free_port

    proxy = await start_proxy(UpstreamSettings(name="gone", url=f"http://127.0.0.1:{free_port()}"))
    assert (await proxy.post(CHAT, json={"model": "m"})).status == 502
    assert (
        await eventually(
            proxy, "toolcall_proxy_upstream_errors_total", upstream="gone", kind="unreachable"
        )
        == 1
    )


async def test_metrics_speak_openmetrics_to_a_scraper_that_asks(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(replay_app(b"")))
    resp = await proxy.get(
        "/-/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
    assert (await resp.text()).endswith("# EOF\n")


# Repairs: every golden case of the normalizer, replayed through the proxy ----------------

GOLDEN = Path(__file__).parents[1] / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text())
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text())


async def test_metrics_show_each_repair_kind_after_repaired_streams_pass(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """Each golden case's upstream body goes through the real proxy, one request per case;
    the repair counters end up with every kind the cases name, as often as they name it."""
    bodies = {case["name"]: (GOLDEN / f"{case['name']}.in.sse").read_bytes() for case in CASES}

    async def replay_case(request: web.Request) -> web.StreamResponse:
        case = CASES[int(request.match_info["case"])]
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for part in split_events(bodies[case["name"]]):
            await response.write(part)
        if not case["complete"]:
            assert request.transport is not None
            request.transport.close()  # the upstream dies mid-stream
            return response
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/{case}/v1/chat/completions", replay_case)
    upstream = await start_upstream(app)
    # The golden outputs are made with the markup dialects their cases name (most none); the
    # proxy has those on, which leaves the other cases' streams as they are.
    dialects = sorted({name for case in CASES for name in case.get("dialects", ())})
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), dialects=dialects or "none")
    )
    expected: Counter[str] = Counter()
    for i, case in enumerate(CASES):
        request = {**REQUESTS[case["request"]], "model": "m", "stream": True}
        resp = await proxy.post(f"/{i}{CHAT}", json=request)
        with contextlib.suppress(ClientPayloadError):
            await resp.read()
        # a call recovered from markup counts under its kind; its dialect is a label of its own
        expected.update(kind.split(":")[0] for kind in case["repairs"])

    kinds = Counter[str]()
    for _ in range(100):
        samples = await scrape(proxy)
        kinds = Counter(
            {
                dict(labels)["kind"]: int(v)
                for (name, labels), v in samples.items()
                if name == "toolcall_proxy_repairs_total"
            }
        )
        if len(kinds) >= len(expected):
            break
        await asyncio.sleep(0.02)
    assert set(kinds) == set(expected)
    for kind, cases in expected.items():
        assert kinds[kind] >= cases, kind
    requests = value(
        samples,
        "toolcall_proxy_requests_total",
        upstream="u",
        model="m",
        route="other",
        status="200",
    )
    assert requests == len(CASES)
    assert value(samples, "toolcall_proxy_chunk_processing_seconds_count", upstream="u")
    assert value(
        samples, "toolcall_proxy_first_byte_added_seconds_count", upstream="u", rewritten="yes"
    ) == len(CASES)


async def test_calls_recovered_from_text_are_counted_by_dialect(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolcall_proxy.access")
    markup = '<tool_call>\\n{\\"name\\": \\"get_weather\\", \\"arguments\\": {\\"city\\": \\"Paris\\"}}\\n</tool_call>'
    body = (
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"'
        + markup
        + '"},"finish_reason":null}]}\n\n'
        'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n'
        "data: [DONE]\n\n"
    ).encode()
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="ollama", url=upstream_url(upstream), dialects=["hermes"])
    )
    request = {**REQUESTS["weather"], "model": "qwen", "stream": True}
    out = await (await proxy.post(CHAT, json=request)).read()
    assert b'"name":"get_weather"' in out

    labels = {"upstream": "ollama", "model": "qwen"}
    assert (
        await eventually(proxy, "toolcall_proxy_text_tool_calls_total", dialect="hermes", **labels)
        == 1
    )
    samples = await scrape(proxy)
    # side="response": the stream's repairs (issue 23 added the request's, side="request")
    assert (
        value(
            samples,
            "toolcall_proxy_repairs_total",
            kind="markup-in-content",
            side="response",
            **labels,
        )
        == 1
    )
    [record] = [r.access for r in caplog.records if r.name == "toolcall_proxy.access"]  # type: ignore[attr-defined]
    assert record["rewritten"] is True
    assert record["repairs"]["markup-in-content:hermes"] == 1


async def test_with_every_dialect_on_calls_are_counted_by_the_dialect_that_matched(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """glm shares <tool_call> with hermes and qwen3_coder; kimi_k2 has markers of its own."""
    glm = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    kimi = (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:1"
        '<|tool_call_argument_begin|>{"city": "Lyon"}<|tool_call_end|><|tool_calls_section_end|>'
    )
    body = (
        chunk_event({"role": "assistant", "content": glm})
        + chunk_event({"content": kimi})
        + chunk_event({}, "stop")
        + b"data: [DONE]\n\n"
    )
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="all", url=upstream_url(upstream), dialects="auto")
    )
    request = {**REQUESTS["weather"], "model": "m", "stream": True}
    out = await (await proxy.post(CHAT, json=request)).read()
    assert out.count(b'"name":"get_weather"') == 2

    labels = {"upstream": "all", "model": "m"}
    name = "toolcall_proxy_text_tool_calls_total"
    assert await eventually(proxy, name, dialect="glm", **labels) == 1
    samples = await scrape(proxy)
    assert value(samples, name, dialect="kimi_k2", **labels) == 1
    assert value(samples, name, dialect="unknown", **labels) is None


def chunk_event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "c",
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


def long_call_stream() -> bytes:
    opening = {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": ""},
            }
        ]
    }
    parts = ['{"city": "', *["x" * 50] * 60, '"}']
    args = [
        chunk_event({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in parts
    ]
    return (
        chunk_event({"role": "assistant", **opening})
        + b"".join(args)
        + chunk_event({}, "tool_calls")
        + b"data: [DONE]\n\n"
    )


UNFINISHED_MARKUP = (
    chunk_event(
        {
            "role": "assistant",
            "content": '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Par',
        }
    )
    + chunk_event({}, "stop")
    + b"data: [DONE]\n\n"
)


@pytest.mark.parametrize(
    ("body", "settings", "kinds"),
    [
        (long_call_stream(), {"limits": {"max_held_bytes": 1024}}, {"cap-reached"}),
        # issue 24 item 4: the unfinished block is given back as text, no call (before: a
        # markup call cut off, markup-in-content and args-truncated too)
        (UNFINISHED_MARKUP, {}, {"markup-broken"}),
    ],
    ids=["held-bytes-cap", "markup-cut-off"],
)
async def test_repairs_outside_the_golden_cases_show_too(
    body: bytes,
    settings: dict[str, Any],
    kinds: set[str],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), dialects=["hermes"]), **settings
    )
    await (
        await proxy.post(CHAT, json={**REQUESTS["weather"], "model": "m", "stream": True})
    ).read()
    for kind in kinds:
        assert (
            await eventually(
                proxy,
                "toolcall_proxy_repairs_total",
                upstream="u",
                model="m",
                kind=kind,
                side="response",  # issue 23: the label tells the stream's from the request's
            )
            >= 1
        ), kind


async def test_a_repaired_whole_completion_counts_its_repairs_and_bytes(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    completion = {
        "id": "c", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
        ]}}],
    }  # fmt: skip

    app = serve_writes([orjson.dumps(completion)], content_type="application/json")
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.post(CHAT, json={**REQUESTS["weather"], "model": "m"})
    fixed = await resp.read()
    assert (
        json.loads(fixed)["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
        == '{"city":"Paris"}'
    )

    labels = {"upstream": "up0", "model": "m"}
    assert (
        await eventually(
            proxy,
            "toolcall_proxy_repairs_total",
            kind="arguments-not-a-string",
            side="response",  # issue 23: the label tells the stream's from the request's
            **labels,
        )
        == 1
    )
    samples = await scrape(proxy)
    assert value(
        samples, "toolcall_proxy_response_bytes_total", upstream="up0", direction="sent"
    ) == len(fixed)
    assert (
        value(
            samples,
            "toolcall_proxy_first_byte_added_seconds_count",
            upstream="up0",
            rewritten="yes",
        )
        == 1
    )


def test_batch_histogram_matches_prometheus_clients_own() -> None:
    values = [0.0, 0.00001, 0.00002, 0.5, 1.0, 3.0, 11.0, 0.0001, 0.0001]
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    batch = BatchHistogram("t_seconds", "t", "upstream", LATENCY_BUCKETS)
    ours.register(batch)
    batch.add("u", values[:4])
    batch.add("u", values[4:])
    histogram = Histogram("t_seconds", "t", ["upstream"], buckets=LATENCY_BUCKETS, registry=theirs)
    for v in values:
        histogram.labels("u").observe(v)

    def samples(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
        return {
            (s.name, s.labels.get("le", "")): s.value
            for family in registry.collect()
            for s in family.samples
            if not s.name.endswith("_created")
        }

    mine, reference = samples(ours), samples(theirs)
    total = ("t_seconds_sum", "")
    assert mine.pop(total) == pytest.approx(reference.pop(total)) == pytest.approx(sum(values))
    assert mine == reference
    assert samples(ours)[("t_seconds_bucket", "1e-05")] == 2  # on a bound counts as below it
    assert samples(ours)[("t_seconds_bucket", "10.0")] == 8
    assert samples(ours)[("t_seconds_bucket", "+Inf")] == 9


async def test_request_duration_and_time_to_first_byte_as_the_client_sees_them(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    """issue 28 item 5: the dashboard's quantiles, the upstream's own time included."""

    async def slow(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(0.3)  # the prompt's processing: before the first byte
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"choices":[]}\n\n')
        await asyncio.sleep(0.3)  # the generation: after it
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post(CHAT, slow)
    proxy = await start_proxy(
        UpstreamSettings(name="slow", url=upstream_url(await start_upstream(app)), normalize=False)
    )
    resp = await proxy.post(CHAT, json={"model": "m", "stream": True})
    await resp.read()
    name = "toolcall_proxy_request_duration_seconds"
    assert await eventually(proxy, f"{name}_count", upstream="slow") == 1
    samples = await scrape(proxy)
    ttfb = "toolcall_proxy_time_to_first_byte_seconds"
    assert value(samples, f"{ttfb}_count", upstream="slow") == 1
    first, whole = (
        value(samples, f"{ttfb}_sum", upstream="slow"),
        value(samples, f"{name}_sum", upstream="slow"),
    )
    assert first is not None
    assert whole is not None
    assert 0.3 <= first <= whole - 0.3
    assert value(samples, f"{ttfb}_bucket", upstream="slow", le="0.25") == 0
