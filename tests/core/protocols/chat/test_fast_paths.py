"""The chat codec's fast paths change nothing: with them on (the default) a stream comes out
byte for byte as with them off (``StreamNormalizer(..., fast=False)``: every event decoded,
parsed and processed, no byte check, hot path or repeated shape taken), with the same repairs
and argument text dropped, for every golden stream, however it is cut, for the bench's
repeated-shape streams and for generated quirky streams, with the same usage read; and the
bridge's events are the same both ways. The fast paths are proxy/core/protocols/chat/fast.py, the byte checks in
chat/normalize.py and the whole-read path of chat/sse_stream.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.shapes import LENGTH_SHAPES, NO_TOOLS, SHAPES, TOOLS, model_name, templates
from proxy.core.bridge import ChatBridge
from proxy.core.events import StreamEvent
from proxy.core.jsonvalues import loads
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat import normalize
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.usage import Tokens
from tests.support.normalizer import bytewise, counting_ids, cut, eventwise, random_cuts
from tests.support.recorder import Recorder
from tests.support.stream_strategies import Drawn, streams

GOLDEN = Path(__file__).parents[3] / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = {
    **json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8")),
    "bench-tools": {"tools": TOOLS},
    "bench-no-tools": {},
}


def _normalizer(case: dict[str, Any], *, fast: bool, held: int | None = None) -> StreamNormalizer:
    options = UpstreamOptions(
        dialects=tuple(case.get("dialects", ())),
        coalesce=case.get("coalesce", False),
        dedupe_calls=case.get("dedupe", False),
    )
    if held is not None:
        options = UpstreamOptions(
            dialects=options.dialects,
            coalesce=options.coalesce,
            dedupe_calls=options.dedupe_calls,
            max_held_bytes=held,
        )
    request = RequestInfo.from_body(REQUESTS[case["request"]])
    return StreamNormalizer(options, request, new_id=counting_ids(), fast=fast)


def chat(
    case: dict[str, Any], reads: list[bytes], *, fast: bool, held: int | None = None
) -> tuple[bytes, Counter[str], list[str], Tokens | None]:
    """A chat client's bytes, the repairs counted, the argument text dropped and the usage
    read (issue 28 item 4)."""
    normalizer = _normalizer(case, fast=fast, held=held)
    stream = ChatSSEStream(normalizer)
    out = [data for read in reads for data in stream.feed(read)]
    out += stream.close(complete=case["complete"])
    return b"".join(out), normalizer.repairs, normalizer.dropped_arguments, stream.usage.tokens()


def bridged(case: dict[str, Any], reads: list[bytes], *, fast: bool) -> list[StreamEvent]:
    recorder = Recorder()
    bridge = ChatBridge(ChatSSEStream(_normalizer(case, fast=fast)), recorder)
    for read in reads:
        bridge.feed(read)
    bridge.close(complete=case["complete"])
    return recorder.events


def assert_same_both_ways(case: dict[str, Any], reads: list[bytes]) -> None:
    assert chat(case, reads, fast=True) == chat(case, reads, fast=False)
    assert bridged(case, reads, fast=True) == bridged(case, reads, fast=False)


cases = pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])


@cases
def test_every_golden_stream_comes_out_the_same_with_the_fast_paths_off(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    for reads in [
        [body],
        bytewise(body),
        eventwise(body),
        eventwise(body, 10),
        *random_cuts(body, case["name"], count=3),
    ]:
        assert_same_both_ways(case, reads)


@cases
@pytest.mark.parametrize("held", [0, 40, 200])
def test_the_cap_gives_way_at_the_same_byte_with_the_fast_paths_off(case, held):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    for reads in [[body], eventwise(body)]:
        assert chat(case, reads, fast=True, held=held) == chat(case, reads, fast=False, held=held)


@pytest.mark.parametrize("shape", [*SHAPES, *LENGTH_SHAPES])
def test_repeated_chunk_shapes_come_out_the_same_with_the_fast_paths_off(shape):
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name(shape, 60, 0)))]
    request = "bench-no-tools" if shape in NO_TOOLS else "bench-tools"
    case = {"request": request, "complete": True, "dialects": ("hermes",)}
    body = b"".join(events)
    for reads in [
        [body],
        eventwise(body),
        eventwise(body, 10),
        cut(body, range(0, len(body), 700)),
    ]:
        assert_same_both_ways(case, reads)


def _usage_chunk(usage: bytes) -> bytes:
    head = b'data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,'
    return head + b'"model":"m","choices":[],"usage":' + usage + b"}\n\n"


def _usage_stream(shape: str, usage: bytes, last: bool) -> bytes:
    """The bench's shape with ``usage`` beside ``choices`` in each of its text or argument
    chunks (the ones that repeat a shape), a usage chunk of other figures among them (so that
    the latest usage is a repeat's), and with ``last`` a usage chunk after the finish."""
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name(shape, 30, 0)))]
    marked = [e.replace(b',"choices":', b',"usage":' + usage + b',"choices":') for e in events]
    other = _usage_chunk(b'{"prompt_tokens":9,"completion_tokens":12}')
    end = [_usage_chunk(b'{"prompt_tokens":9,"completion_tokens":31}')] if last else []
    return b"".join([events[0], *marked[1:12], other, *marked[12:-2], events[-2], *end, events[-1]])


@pytest.mark.parametrize("shape", ["content", "toolcall", "plain"])
@pytest.mark.parametrize(
    "usage",
    [b"null", b'{"prompt_tokens":9,"completion_tokens":1}', b'{ "prompt_tokens" : 9 }'],
    ids=["null", "object", "spaced"],
)
@pytest.mark.parametrize("last", [True, False], ids=["usage-chunk", "no-usage-chunk"])
def test_usage_in_repeated_chunks_is_read_the_same_with_the_fast_paths_off(shape, usage, last):
    # a repeat's envelope is its shape's, so whether it holds a usage object is the shape's
    # to say (chat/fast.py ShapeRepeat.usage); a passed read's is found by the byte checks'
    # one search (chat/chunks.py uninteresting)
    body = _usage_stream(shape, usage, last)
    request = "bench-no-tools" if shape in NO_TOOLS else "bench-tools"
    case = {"request": request, "complete": True}
    for reads in [
        [body],
        eventwise(body),
        eventwise(body, 10),
        cut(body, range(0, len(body), 700)),
    ]:
        slow = chat(case, reads, fast=False)
        assert chat(case, reads, fast=True) == slow
        assert slow[3] is not None


def test_the_fast_paths_are_taken_when_on_and_only_then(monkeypatch):
    # the switch is no dead letter: on, most chunks of a stream of repeated shapes go out
    # unparsed; off, every one is parsed
    parsed: list[bytes] = []

    def counting(data: bytes | str) -> object:
        parsed.append(data if isinstance(data, bytes) else data.encode())
        return loads(data)

    monkeypatch.setattr(normalize, "loads", counting)
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name("content", 60, 0)))]
    case = {"request": "bench-tools", "complete": True}
    taken = {}
    for fast in (True, False):
        parsed.clear()
        chat(case, eventwise(b"".join(events)), fast=fast)
        taken[fast] = len(parsed)
    data_events = sum(not e.startswith(b"data: [DONE]") for e in events)
    assert taken[False] == data_events
    assert taken[True] < data_events // 4


@pytest.mark.parametrize("shape", ["content", "toolcall", "hermes"])
def test_the_first_chunk_with_its_role_goes_out_as_it_came_unparsed_when_on(shape, monkeypatch):
    # issue 29, the first events of a stream: a request that offered tools has its first
    # chunk's role looked at; a chunk whose one delta begins with it is judged by its bytes
    parsed: list[bytes] = []

    def counting(data: bytes | str) -> object:
        parsed.append(data if isinstance(data, bytes) else data.encode())
        return loads(data)

    monkeypatch.setattr(normalize, "loads", counting)
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name(shape, 5, 0)))]
    assert b'"delta":{"role":"assistant"' in events[0]
    case = {"request": "bench-tools", "complete": True, "dialects": ("hermes",)}
    stream = ChatSSEStream(_normalizer(case, fast=True))
    [first] = stream.feed(events[0])
    assert first is events[0]
    assert parsed == []
    for event in events[1:]:
        stream.feed(event)
    assert not any(b'"role"' in data for data in parsed)
    assert parsed  # the rest still takes the paths it took


@pytest.mark.parametrize("held", [0, 40, 300, 1000, 4096])
def test_a_held_markup_call_reaches_the_cap_at_the_same_byte_with_the_fast_paths_off(held):
    # hermes markup one token a chunk: the call is held until its markup ends (issue 24
    # item 4), its chunks fed to the extractor unparsed (chat/fast.py HeldRepeat), and the
    # held text must reach max_held_bytes mid-call at the same byte both ways
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name("hermes", 60, 0)))]
    case = {"request": "bench-tools", "complete": True, "dialects": ("hermes",)}
    body = b"".join(events)
    for reads in [eventwise(body), cut(body, range(0, len(body), 300))]:
        slow = chat(case, reads, fast=False, held=held)
        assert chat(case, reads, fast=True, held=held) == slow
        assert (slow[1]["cap-reached"] > 0) == (held < 4096)


def test_a_held_markup_call_is_fed_unparsed_when_on(monkeypatch):
    # the held form's hot path is taken: most chunks of the held call are not parsed
    parsed: list[bytes] = []

    def counting(data: bytes | str) -> object:
        parsed.append(data if isinstance(data, bytes) else data.encode())
        return loads(data)

    monkeypatch.setattr(normalize, "loads", counting)
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name("hermes", 60, 0)))]
    case = {"request": "bench-tools", "complete": True, "dialects": ("hermes",)}
    taken = {}
    for fast in (True, False):
        parsed.clear()
        chat(case, eventwise(b"".join(events)), fast=fast)
        taken[fast] = len(parsed)
    assert taken[True] < taken[False] // 4


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    streams(),
    st.sampled_from(["weather", "bench-no-tools"]),
    st.booleans(),
    st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_quirky_streams_come_out_the_same_with_the_fast_paths_off(
    drawn: Drawn, request, s2, points
):
    case = {"request": request, "complete": True, "coalesce": s2, "dedupe": s2}
    for reads in [cut(drawn.body, sorted(points)), eventwise(drawn.body)]:
        assert_same_both_ways(case, reads)
