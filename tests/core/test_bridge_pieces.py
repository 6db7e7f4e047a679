"""The bridge reads its events off the normalizer's pieces, not off chat bytes: the events
are those the chat decoder reads off the chat stream a chat client gets (the rules of
chat/decode.py: choice 0, ``Started`` first, calls closed at the finish, errors, usage), for
every golden stream, however it is cut, and when the cap gives way at the same byte; and no
chat chunk is rendered for it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.shapes import LENGTH_SHAPES, NO_TOOLS, SHAPES, TOOLS, model_name, templates
from proxy.core.bridge import GAVE_UP, ChatBridge
from proxy.core.events import ArgumentsDelta, Failed, StreamEvent
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat import sent
from proxy.core.protocols.chat.decode import ChatDecoder
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sent import Own, Released
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.sse import Event, SSEDecoder
from tests.support.normalizer import bytewise, counting_ids, cut, eventwise, random_cuts
from tests.support.recorder import Recorder
from tests.support.stream_strategies import Drawn, streams

GOLDEN = Path(__file__).parent.parent / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8"))


def _normalizer(case: dict[str, Any], held: int | None) -> StreamNormalizer:
    options = UpstreamOptions(
        dialects=tuple(case.get("dialects", ())),
        coalesce=case.get("coalesce", False),
        dedupe_calls=case.get("dedupe", False),
    )
    if held is not None:
        options = replace(options, max_held_bytes=held)
    return StreamNormalizer(
        options, RequestInfo.from_body(REQUESTS[case["request"]]), new_id=counting_ids()
    )


def bridged(case: dict[str, Any], reads: list[bytes], held: int | None = None) -> list[StreamEvent]:
    recorder = Recorder()
    chat = ChatSSEStream(_normalizer(case, held))
    bridge = ChatBridge(chat, recorder)
    for read in reads:
        bridge.feed(read)
    bridge.close(complete=case["complete"])
    return recorder.events


def decoded(case: dict[str, Any], reads: list[bytes], held: int | None = None) -> list[StreamEvent]:
    """What the chat decoder reads off a chat client's stream; the failure where its
    normalizer gives up (and nothing of that read, which is chat the client may not get)."""
    normalizer = _normalizer(case, held)
    # issue 26 item 8: a client of another protocol is not failed for the text a call that
    # went out keeps for the checks (that counts toward max_response_body_bytes), a chat
    # client's stream is; so the chat stream's cap is asked the bridge's question here
    normalizer.kept_limit = normalizer.options.max_response_body_bytes
    chat = ChatSSEStream(normalizer)
    frames, decoder = SSEDecoder(max_event_bytes=1 << 20), ChatDecoder()
    events: list[StreamEvent] = []

    def take(written: list[bytes]) -> bool:
        if normalizer.gave_up:
            events.append(Failed(GAVE_UP, "proxy_error"))
            return False
        for data in written:
            for item in frames.feed(data):
                if isinstance(item, Event):
                    events.extend(decoder.feed_event(item))
        return True

    for read in reads:
        if not take(chat.feed(read)):
            return events
    if take(chat.close(complete=case["complete"])):
        events.extend(decoder.close(complete=case["complete"]))
    return events


cases = pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])


@cases
def test_bridge_events_are_what_the_chat_decoder_reads_off_the_chat_stream(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    cuts = [[body], bytewise(body), *random_cuts(body, case["name"], count=3)]
    for reads in cuts:
        assert bridged(case, reads) == decoded(case, reads)


@cases
@pytest.mark.parametrize("held", [0, 40, 200])
def test_the_cap_gives_way_at_the_same_byte_as_on_the_chat_stream(case, held):
    # what waits behind a held call counts toward the cap as the chat bytes it stands for
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    for reads in [[body], bytewise(body)]:
        assert bridged(case, reads, held) == decoded(case, reads, held)


def _bench_stream(shape: str) -> tuple[dict[str, Any], bytes]:
    """A bench stream (bench/shapes.py): chunks that repeat one envelope around new text,
    the shapes the normalizer's repeat paths take."""
    events = [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name(shape, 60, 0)))]
    request = "bench-no-tools" if shape in NO_TOOLS else "bench-tools"
    return {"request": request, "complete": True, "dialects": ("hermes",)}, b"".join(events)


@pytest.fixture(autouse=True)
def _bench_requests(monkeypatch):
    monkeypatch.setitem(REQUESTS, "bench-tools", {"tools": TOOLS})
    monkeypatch.setitem(REQUESTS, "bench-no-tools", {})


@pytest.mark.parametrize("shape", [*SHAPES, *LENGTH_SHAPES])
def test_repeated_chunk_shapes_give_the_chat_decoders_events(shape):
    case, body = _bench_stream(shape)
    for reads in [
        [body],
        eventwise(body),
        eventwise(body, 10),
        cut(body, range(0, len(body), 700)),
    ]:
        assert bridged(case, reads) == decoded(case, reads)


RENDERS_NOTHING = [
    "canonical-openai",
    "fixture-ollama-2024-hermes-markup-in-content-partial",
    "markup-minimax-m2",
    "q01-name-repeated",
    "q30-llamacpp-error-field",
    "n2-two-choices",
]


def never_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the chat writer's rendering fail (chat/sent.py: what the chat client's writer
    asks of the values it writes; chat/render.py's two entry points behind it)."""

    def rendered(*args: object, **kwargs: object) -> None:
        raise AssertionError("a chat chunk was rendered for the bridge")

    for value in (Own, Released):
        monkeypatch.setattr(value, "chat", rendered)
    monkeypatch.setattr(sent, "render_own", rendered)
    monkeypatch.setattr(sent, "render_released", rendered)


@pytest.mark.parametrize("name", RENDERS_NOTHING)
def test_the_bridge_renders_no_chat_chunk(name, monkeypatch):
    # the chunks these streams need rewritten reach the encoder as events, never as chat
    # bytes (only what waits behind a held call is measured in them, for the cap)
    never_rendered(monkeypatch)
    case = next(c for c in CASES if c["name"] == name)
    body = (GOLDEN / f"{name}.in.sse").read_bytes()
    assert len(bridged(case, [body])) > 2


def test_markup_arguments_in_a_repeated_shape_render_no_chat_chunk(monkeypatch):
    never_rendered(monkeypatch)
    case, body = _bench_stream("hermes")
    events = bridged(case, eventwise(body))
    assert sum(isinstance(e, ArgumentsDelta) for e in events) > 50


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    streams(),
    st.sampled_from(["weather", "bench-no-tools"]),
    st.booleans(),
    st.lists(st.integers(0, 1 << 16), max_size=12),
)
def test_quirky_streams_give_the_chat_decoders_events_however_cut(
    drawn: Drawn, request, s2, points
):
    case = {"request": request, "complete": True, "coalesce": s2, "dedupe": s2}
    reads = cut(drawn.body, sorted(points))
    assert bridged(case, reads) == decoded(case, reads)
