"""The contract of every native repairer (a server's own stream of the client's protocol,
repaired in place), run over each one the registry names, made through its entry point
(``ClientProtocol.native``). Only the shapes are the protocol's (native_cases.py):

* canonical input comes out byte for byte identical, however it is cut, and a stream cut
  short comes out as it came, nothing made up;
* a call sent twice in a row (Gemma 4 on llama.cpp, llama.cpp#21882; issue 16's gap 4) is
  always counted (``call-duplicated``) and otherwise untouched; under ``dedupe_calls`` the
  second is held until its arguments end, then dropped, and what follows closes up; a held
  call costs the same per event however long it is;
* the configured limits reach the repairer: past ``max_held_bytes``,
  ``max_response_body_bytes`` or ``max_event_bytes`` it fails open, what it held going out
  as the upstream sent it and nothing added after (issue 26 items 2 and 7), logged once.

What only one protocol has (its quirks, its fields) stays in tests/core/protocols/<protocol>/.
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.base import NativeStream
from proxy.core.protocols.registry import CLIENT_PROTOCOLS, translated_protocols
from proxy.core.repairs import Repair
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.core.protocols.native_cases import CASES, REQUESTS, NativeCase, every_cut, run
from tests.support.cpu import least_cpu_seconds
from tests.support.native_shapes import REQUESTS as COST_REQUESTS
from tests.support.native_shapes import SHAPES as COST_SHAPES
from tests.support.upstreams import serve_writes

# a native repairer is a translated protocol's mode on an upstream that serves the protocol
# itself; chat, registered too, is the protocol translation sends and has no native mode
PROTOCOLS = [protocol.name for protocol in translated_protocols()]
CANONICAL = [(p, name) for p in PROTOCOLS for name in CASES[p].canonical]
REPEATED = [(p, name) for p in PROTOCOLS for name in CASES[p].repeated]
#: the arguments' fixes (issue 25) off and on: a call is then held until its input ends and
#: sent whole, and a valid stream must still come out as it came, byte for byte and uncounted
HEALING = pytest.mark.parametrize(
    "healing",
    [{}, {"heal_arguments": True, "coerce_arguments": True}],
    ids=["heal-off", "heal-coerce"],
)


@pytest.fixture(params=PROTOCOLS)
def case(request: pytest.FixtureRequest) -> NativeCase:
    return CASES[request.param]


def test_every_registered_native_repairer_is_held_to_the_contract() -> None:
    assert list(CASES) == PROTOCOLS


# -- canonical input, cut anywhere ----------------------------------------------------------


@pytest.mark.parametrize(("protocol", "name"), CANONICAL)
@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
@HEALING
def test_a_canonical_stream_comes_out_byte_identical_however_cut(
    protocol: str, name: str, tools: bool, healing: dict[str, bool]
) -> None:
    case = CASES[protocol]
    data = case.canonical[name]
    request = case.tools_request if tools else case.no_tools_request
    for pieces in every_cut(data, name):
        out, repairs = run(protocol, pieces, request, **healing)
        assert out == data
        assert not repairs


@pytest.mark.parametrize(("protocol", "name"), CANONICAL)
@HEALING
def test_a_canonical_stream_cut_short_anywhere_comes_out_as_it_came(
    protocol: str, name: str, healing: dict[str, bool]
) -> None:
    """Cut at every event's end and inside every tenth event: the head, byte for byte, and
    no end of the proxy's (a cut-off stream never reaches the client as a clean finish)."""
    case = CASES[protocol]
    data = case.canonical[name]
    ends = [at + 2 for at in range(len(data)) if data.startswith(b"\n\n", at)]
    inside = [end - 7 for end in ends[::10]]
    for at in sorted({*ends[:-1], *inside}):
        head = data[:at]
        out, _ = run(protocol, [head], case.tools_request, complete=False, **healing)
        assert out == head, f"cut at {at}"
        assert out.count(case.terminal) == head.count(case.terminal)


# -- repeats: counted, held, dropped --------------------------------------------------------


@pytest.mark.parametrize(("protocol", "name"), REPEATED)
@HEALING
def test_a_repeated_call_is_counted_and_left_alone_by_default(
    protocol: str, name: str, healing: dict[str, bool]
) -> None:
    case = CASES[protocol]
    twice, once = case.repeated[name]
    for pieces in every_cut(twice, name):
        out, repairs = run(protocol, pieces, case.tools_request, **healing)
        assert out == twice
        assert repairs == {Repair.CALL_DUPLICATED: 1}
    calls = case.calls(twice)
    assert len(calls) == len(case.calls(once)) + 1
    assert sum(case.repeat_marker.decode() in c for c in calls) == 1


@pytest.mark.parametrize(("protocol", "name"), REPEATED)
@HEALING
def test_dedupe_calls_drops_the_repeat_and_closes_up_what_follows(
    protocol: str, name: str, healing: dict[str, bool]
) -> None:
    case = CASES[protocol]
    twice, once = case.repeated[name]
    expected, _ = run(protocol, twice, case.tools_request, dedupe_calls=True)
    for pieces in every_cut(twice, name):
        out, repairs = run(protocol, pieces, case.tools_request, dedupe_calls=True, **healing)
        assert out == expected
        assert repairs == {Repair.CALL_DUPLICATED: 1}
    assert case.repeat_marker not in expected
    # strict: numbering and positions dense; the events of the stream without the repeat
    assert case.calls(expected) == case.calls(once)
    assert case.structure(expected) == case.structure(once)
    assert case.payloads(expected) == case.payloads(once)


@HEALING
def test_calls_of_one_name_with_other_arguments_are_held_and_come_out_byte_identical(
    case: NativeCase, healing: dict[str, bool]
) -> None:
    data = case.other_arguments
    for pieces in every_cut(data, case.name):
        out = run(case.name, pieces, case.tools_request, dedupe_calls=True, **healing)
        assert out == (data, {})


def test_a_held_repeat_cut_short_goes_out_as_it_came_without_an_end(case: NativeCase) -> None:
    twice, _ = next(iter(case.repeated.values()))
    head = case.repeat_cut(twice)
    out, repairs = run(case.name, head, case.tools_request, complete=False, dedupe_calls=True)
    assert out == head
    assert not repairs


def test_the_protocol_entry_point_passes_dedupe_calls_on(case: NativeCase) -> None:
    twice, once = next(iter(case.repeated.values()))
    for dedupe, calls in ((False, len(case.calls(twice))), (True, len(case.calls(once)))):
        options = UpstreamOptions(dedupe_calls=dedupe)
        stream = CLIENT_PROTOCOLS[case.name].native(
            new_id=lambda: "x", request=case.tools_request, options=options
        )
        out = b"".join(stream.feed(twice) + stream.close(complete=True))
        assert len(case.calls(out)) == calls


@pytest.mark.parametrize("dedupe", [False, True])
async def test_dedupe_calls_drops_a_repeat_through_the_proxy(
    case: NativeCase, start_upstream: StartUpstream, start_proxy: StartProxy, dedupe: bool
) -> None:
    twice, once = next(iter(case.repeated.values()))
    server = await start_upstream(serve_writes([twice]))
    modes = {case.name: "native"}
    proxy = await start_proxy(
        UpstreamSettings(name="n", url=upstream_url(server), dedupe_calls=dedupe, **modes)
    )
    path = "/v1" + CLIENT_PROTOCOLS[case.name].path_suffix
    response = await proxy.post(path, json={**case.tools_request, "stream": True})
    assert response.status == 200
    out = await response.read()
    if dedupe:
        assert case.calls(out) == case.calls(once)
        assert case.payloads(out) == case.payloads(once)
    else:
        assert out == twice


def test_a_repeated_markup_call_in_text_is_dropped_under_dedupe_calls(case: NativeCase) -> None:
    data = case.markup_twice
    kept, kept_repairs = run(case.name, data, case.tools_request)
    assert kept_repairs[Repair.CALL_DUPLICATED] == 1
    kinds, text = case.structure(kept)
    call = kinds[1]
    assert kinds == [kinds[0], call, call, kinds[0]]
    expected, _ = run(case.name, data, case.tools_request, dedupe_calls=True)
    for pieces in every_cut(data, case.name + "-markup"):
        out, repairs = run(case.name, pieces, case.tools_request, dedupe_calls=True)
        assert out == expected
        assert repairs[Repair.CALL_DUPLICATED] == 1
    assert case.structure(expected) == ([kinds[0], call, kinds[0]], text)
    assert len(case.calls(expected)) == 1


def test_a_held_repeat_costs_the_same_per_event_however_long_it_is(case: NativeCase) -> None:
    def cpu(data: bytes, repeat: int) -> float:
        reads = [data[i : i + 1500] for i in range(0, len(data), 1500)]
        return least_cpu_seconds(
            lambda: run(case.name, reads, case.tools_request, dedupe_calls=True), repeat
        )

    short = cpu(case.long_repeat(2_000), 3)
    long = cpu(case.long_repeat(32_000), 2)
    assert long < 40 * short, f"16x the input took {long / short:.0f}x the CPU"


# -- the limits ------------------------------------------------------------------------------

CAP = 64 << 10


async def native_proxy(
    protocol: str,
    writes: list[bytes],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    **settings: Any,
) -> bytes:
    """What a client of ``protocol`` receives through the proxy, in native mode, for an upstream
    that sends ``writes``."""
    upstream = await start_upstream(serve_writes(writes))
    modes = {protocol: "native"}
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), **modes),
        **settings,
    )
    resp = await proxy.post("/v1" + CLIENT_PROTOCOLS[protocol].path_suffix, json=REQUESTS[protocol])
    assert resp.status == 200
    return await resp.read()


def native_stream(protocol: str, **options: Any) -> NativeStream:
    counter = itertools.count()
    return CLIENT_PROTOCOLS[protocol].native(
        new_id=lambda: f"i{next(counter)}",
        request=COST_REQUESTS[protocol],
        options=UpstreamOptions(**options),
    )


async def test_the_configured_max_event_bytes_reaches_the_native_repairer(
    case: NativeCase, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    # without event: lines every event is repaired (given one), unless it goes out raw; the
    # long delta is under the default limit (1 MiB) and over the one configured here
    writes = case.text("Hi. ", "x" * (100 << 10), named=False)
    out = await native_proxy(
        case.name, writes, start_upstream, start_proxy, limits={"max_event_bytes": 64 << 10}
    )
    big = writes.index(next(w for w in writes if len(w) > 100 << 10))
    assert out.startswith(b"event: ")  # repaired: rewriting was on
    assert b"".join(writes[big:]) in out  # from the long event on, raw


def test_a_native_stream_holds_no_more_than_max_held_bytes_and_fails_open_as_it_came(
    case: NativeCase,
) -> None:
    # issue 26 item 2: 100 MiB of arguments behind an open item raised RSS by 1.1 GB
    # (Responses) and 311 MB (Messages) with max_held_bytes at 1 MiB
    build, opening = case.held_shape
    events = build(1 << 20)
    stream = native_stream(case.name, max_held_bytes=CAP)
    fed = received = 0
    out: list[bytes] = []
    for event in events:
        sent = stream.feed(event)
        fed += len(event)
        received += sum(map(len, sent))
        out += sent
        assert fed - received <= CAP + 8192, "held past the cap"
    out += stream.close(complete=True)
    # the second item (the one that waited) opened with the upstream's own bytes, from where
    # it began, to the last byte: nothing repaired, nothing added, not even an end
    first_held = next(i for i, e in enumerate(events) if e.startswith(opening) and i > 2)
    assert b"".join(out).endswith(b"".join(events[first_held:]))
    assert stream.repairs[Repair.CAP_REACHED] == 1


def test_a_native_stream_keeping_more_than_max_response_body_bytes_fails_open(
    case: NativeCase,
) -> None:
    events = case.long_arguments(1 << 15)
    stream = native_stream(case.name, max_response_body_bytes=CAP)
    out = b"".join(b for event in events for b in stream.feed(event))
    out += b"".join(stream.close(complete=True))
    assert stream.repairs[Repair.CAP_REACHED] == 1
    # the call's arguments went out as they streamed, and all of them
    assert out.count(b'"ab"') == 1 << 15


@pytest.mark.parametrize("how", ["oversize", "cut-inside-an-event"])
def test_once_a_native_stream_went_raw_the_proxy_adds_nothing(case: NativeCase, how: str) -> None:
    # issue 26 item 7: native Messages appended content_block_stop, a message_delta with
    # end_turn and message_stop after raw bytes, glued onto an open line after a cut; what
    # was held went out rewritten after them
    build, opening = case.held_shape
    events = build(4096, piece=4096)  # the waiting item's one long fragment
    first_held = next(i for i, e in enumerate(events) if e.startswith(opening) and i > 2)
    big = next(i for i, e in enumerate(events) if len(e) > 4096)
    if how == "oversize":
        stream = native_stream(case.name, max_event_bytes=2048)
        body = events
    else:
        stream = native_stream(case.name)
        body = [*events[:big], events[big][:-10]]  # the stream ends inside the long event
    out = b"".join(b for event in body for b in stream.feed(event))
    out += b"".join(stream.close(complete=True))
    assert out.endswith(b"".join(body[first_held:]))  # held, then raw: as they came
    assert out.count(b"\n\n") == sum(e.count(b"\n\n") for e in body)  # no event added


async def test_a_native_stream_past_its_cap_is_logged_once(
    case: NativeCase,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    build, _ = case.held_shape
    writes = build(1 << 20)
    out = await native_proxy(
        case.name, writes, start_upstream, start_proxy, limits={"max_held_bytes": CAP}
    )
    assert out.endswith(writes[-1])
    assert caplog.text.count("outgrew limits.max_event_bytes or limits.max_held_bytes") == 1


@pytest.mark.parametrize("shape", list(COST_SHAPES))
@pytest.mark.parametrize("complete", [True, False])
def test_what_a_native_stream_held_is_all_let_go_at_its_end(shape: str, complete: bool) -> None:
    # the count behind max_held_bytes follows every event held and let go: a count that
    # drifted would fail a later stream open for nothing
    protocol, build, small = COST_SHAPES[shape]
    stream = native_stream(protocol, dialects=("hermes",), dedupe_calls=True)
    body = b"".join(build(small))
    for at in range(0, len(body), 1500):
        stream.feed(body[at : at + 1500])
        assert stream.held_bytes >= 0
    stream.close(complete=complete)
    assert stream.held_bytes == 0
    assert Repair.CAP_REACHED not in stream.repairs
