"""Replicas behind one upstream (issue 28 items 1 and 2): balancing, affinity, ejection,
retries before the first byte and never after, through the real proxy in front of real
aiohttp replicas on 127.0.0.1 that the tests kill mid-request."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator
from time import perf_counter
from typing import Any

import pytest
from aiohttp import ClientError, ClientPayloadError, ClientResponse

from proxy.settings import UpstreamSettings
from proxy.shell.accesslog import ACCESS_LOGGER
from tests.conftest import StartProxy
from tests.support.accesslog import logged
from tests.support.metrics import Proxy, scrape, value
from tests.support.raw_upstream import Conn, raw_upstream
from tests.support.replicas import Replica, started

CHAT = "/v1/chat/completions"


def request(text: str = "hi") -> dict[str, Any]:
    return {"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]}


@pytest.fixture(autouse=True)
def access_lines(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    caplog.set_level(logging.INFO, logger="toolcall_proxy")


def served_by(body: str) -> str:
    """The replica that wrote a stream (each names itself in its text)."""
    names: set[str] = set(re.findall(r'"content":"(\w+):\d+ "', body))
    assert len(names) == 1, body
    return names.pop()


@pytest.fixture
async def replicas() -> AsyncIterator[list[Replica]]:
    made = await started("a", "b", "c")
    yield made
    for replica in made:
        await replica.kill()


def fleet(replicas: list[Replica], **options: Any) -> UpstreamSettings:
    return UpstreamSettings(name="m", urls=[r.url for r in replicas], **options)


async def wait_for(condition: Any, seconds: float = 5.0) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition did not come true in time")


async def first_chunk(resp: ClientResponse) -> bytes:
    assert resp.status == 200
    return await resp.content.readuntil(b"\n\n")


async def test_balancing_spreads_the_requests_in_flight(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    for r in replicas:
        r.chunks, r.pause = 50, 0.05
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    streams = [await proxy.post(CHAT, json=request(f"q{n}")) for n in range(6)]
    for resp in streams:
        await first_chunk(resp)
    assert [r.open for r in replicas] == [2, 2, 2]
    samples = await scrape(proxy)
    assert [
        value(samples, "toolcall_proxy_replica_in_flight", upstream="m", replica=r.url)
        for r in replicas
    ] == [2.0, 2.0, 2.0]
    # one finishes on b: the next request goes where the fewest are in flight, b
    for resp in streams:
        resp.close()
    await wait_for(lambda: all(r.open == 0 for r in replicas))
    replicas[0].chunks = replicas[2].chunks = 50
    replicas[1].chunks = 1
    held = [await proxy.post(CHAT, json=request()) for _ in range(3)]  # a, b, c
    await held[1].read()
    before = replicas[1].requests
    third = await proxy.post(CHAT, json=request())
    await first_chunk(third)
    assert replicas[1].requests == before + 1
    for resp in (held[0], held[2], third):
        resp.close()


async def test_affinity_keeps_a_conversation_on_one_replica(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(fleet(replicas))
    served: dict[str, set[str]] = {}
    for session in ("s1", "s2", "s3", "s4", "s5", "s6"):
        for turn in range(4):
            resp = await proxy.post(
                CHAT, json=request(f"turn {turn}"), headers={"x-session-affinity": session}
            )
            assert resp.status == 200
            served.setdefault(session, set()).add(served_by(await resp.text()))
    assert all(len(names) == 1 for names in served.values()), served
    assert len(set().union(*served.values())) > 1, "every conversation went to one replica"
    # no header: a conversation's turns repeat its first messages, which name it
    first = [{"role": "system", "content": "you are an agent"}, {"role": "user", "content": "go"}]
    names = set()
    for turn in range(4):
        later = [{"role": "assistant", "content": f"step {n}"} for n in range(turn)]
        body = {"model": "m", "stream": True, "messages": first + later}
        resp = await proxy.post(CHAT, json=body)
        names.add(served_by(await resp.text()))
    assert len(names) == 1


async def test_without_affinity_the_turns_go_round(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    """The guard of the test above: the same turns, affinity off, reach every replica."""
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    for _turn in range(3):
        resp = await proxy.post(CHAT, json=request(), headers={"x-session-affinity": "s1"})
        assert resp.status == 200
        await resp.read()
    assert [r.requests for r in replicas] == [1, 1, 1]


async def test_a_killed_replica_is_ejected_and_its_requests_retried_elsewhere(
    replicas: list[Replica], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    await replicas[1].kill()
    bodies = []
    for n in range(6):
        resp = await proxy.post(CHAT, json=request(f"q{n}"))
        assert resp.status == 200
        bodies.append(await resp.text())
    assert all(body.endswith("data: [DONE]\n\n") for body in bodies)
    lines = await logged(caplog, 6)
    assert sorted(line["attempts"] for line in lines) == [1, 1, 1, 1, 1, 2]
    [retried] = [line for line in lines if line["attempts"] == 2]
    assert retried["replica"] != replicas[1].url
    assert retried["upstream_errors"] == ["unreachable"]
    samples = await scrape(proxy)
    assert (
        value(
            samples, "toolcall_proxy_replica_ejections_total", upstream="m", replica=replicas[1].url
        )
        == 1
    )
    assert value(samples, "toolcall_proxy_retries_total", upstream="m", reason="unreachable") == 1
    assert [r.requests for r in replicas] == [3, 0, 3]
    assert "ejected for 5 s" in caplog.text


async def test_a_stream_in_flight_when_its_replica_dies_is_cut_never_retried(
    replicas: list[Replica], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    for r in replicas:
        r.chunks, r.pause = 50, 0.05
    proxy = await start_proxy(fleet(replicas, affinity="none", retries=2))
    resp = await proxy.post(CHAT, json=request())
    assert b"a:0" in await first_chunk(resp)
    await replicas[0].kill()
    with pytest.raises(ClientPayloadError):
        await resp.read()
    [line] = await logged(caplog)
    assert (line["end"], line["attempts"], line["replica"]) == ("dropped", 1, replicas[0].url)
    assert [r.requests for r in replicas] == [1, 0, 0]


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_a_5xx_is_sent_to_another_replica(
    replicas: list[Replica], start_proxy: StartProxy, status: int
) -> None:
    replicas[0].status = status
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 200
    assert served_by(await resp.text()) == "b"
    samples = await scrape(proxy)
    assert (
        value(samples, "toolcall_proxy_retries_total", upstream="m", reason=f"http_{status}") == 1
    )
    assert (
        value(
            samples,
            "toolcall_proxy_replica_failures_total",
            upstream="m",
            replica=replicas[0].url,
            kind="http_5xx",
        )
        == 1
    )


async def test_retries_are_bounded_and_the_last_answer_is_the_clients(
    replicas: list[Replica], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    for r in replicas:
        r.status = 503
    proxy = await start_proxy(fleet(replicas, affinity="none"))  # retries: 1 by default
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 503
    assert [r.requests for r in replicas] == [1, 1, 0]
    [line] = await logged(caplog)
    assert line["attempts"] == 2


async def test_a_429_with_a_short_retry_after_is_waited_for_then_sent_elsewhere(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    replicas[0].status, replicas[0].headers = 429, {"Retry-After": "1"}
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    began = perf_counter()
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 200
    assert perf_counter() - began >= 0.9  # it waited the Retry-After
    assert served_by(await resp.text()) == "b"
    samples = await scrape(proxy)
    assert (
        value(
            samples, "toolcall_proxy_replica_ejections_total", upstream="m", replica=replicas[0].url
        )
        is None
    )


@pytest.mark.parametrize("retry_after", ["3", None])
async def test_a_429_with_a_long_or_no_retry_after_is_the_answer(
    replicas: list[Replica], start_proxy: StartProxy, retry_after: str | None
) -> None:
    replicas[0].status = 429
    replicas[0].headers = {} if retry_after is None else {"Retry-After": retry_after}
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 429
    assert [r.requests for r in replicas] == [1, 0, 0]


async def test_a_retry_after_longer_than_the_first_byte_budget_is_not_waited_for(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    replicas[0].status, replicas[0].headers = 429, {"Retry-After": "2"}
    proxy = await start_proxy(fleet(replicas, affinity="none"), timeouts={"first_byte": 1.0})
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 429
    assert [r.requests for r in replicas] == [1, 0, 0]


async def test_a_400_is_never_retried(replicas: list[Replica], start_proxy: StartProxy) -> None:
    replicas[0].status = 400
    proxy = await start_proxy(fleet(replicas, affinity="none", retries=2))
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 400
    assert [r.requests for r in replicas] == [1, 0, 0]
    samples = await scrape(proxy)
    assert (
        value(
            samples, "toolcall_proxy_replica_ejections_total", upstream="m", replica=replicas[0].url
        )
        is None
    )


async def test_one_url_is_not_retried_by_default(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    replicas[0].status = 503
    proxy = await start_proxy(UpstreamSettings(name="m", url=replicas[0].url))
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 503
    assert replicas[0].requests == 1


async def test_an_upload_streamed_through_is_not_retried(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    replicas[0].status = 503
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    resp = await proxy.post(
        CHAT, data=b"\x00" * 1000, headers={"Content-Type": "application/octet-stream"}
    )
    assert resp.status == 503
    assert [r.requests for r in replicas] == [1, 0, 0]


async def test_every_replica_ejected_still_serves_the_one_ejected_longest_ago(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    a, b, _c = replicas
    proxy = await start_proxy(fleet([a, b], affinity="none", retries=0, eject_seconds=60))
    a.status = b.status = 503
    for _ in range(2):
        assert (await proxy.post(CHAT, json=request())).status == 503
    assert (a.requests, b.requests) == (1, 1)  # both ejected now, a first
    a.status = 200
    resp = await proxy.post(CHAT, json=request())
    assert resp.status == 200
    assert served_by(await resp.text()) == "a"


async def test_max_concurrent_requests_applies_per_replica(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    a, b, _ = replicas
    a.chunks = b.chunks = 50
    a.pause = b.pause = 0.05
    proxy = await start_proxy(fleet([a, b], affinity="none", max_concurrent_requests=1))
    held = [await proxy.post(CHAT, json=request()) for _ in range(2)]
    for resp in held:
        await first_chunk(resp)
    assert (a.open, b.open) == (1, 1)
    refused = await proxy.post(CHAT, json=request())
    assert refused.status == 429
    assert "every replica" in (await refused.json())["error"]["message"]
    # the proxy's own listing takes no client's slot
    assert (await proxy.get("/v1/models")).status == 200
    for resp in held:
        resp.close()


async def test_active_health_ejects_a_replica_before_any_request_and_brings_it_back(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    a, b, _ = replicas
    a.health = 503
    proxy = await start_proxy(
        fleet([a, b], affinity="none", health_path="/health", health_interval=0.05)
    )

    async def ejections() -> float | None:
        samples = await scrape(proxy)
        return value(samples, "toolcall_proxy_replica_ejections_total", upstream="m", replica=a.url)

    for _ in range(200):
        if await ejections():
            break
        await asyncio.sleep(0.02)
    assert await ejections() == 1
    for _ in range(4):
        assert (await proxy.post(CHAT, json=request())).status == 200
    assert (a.requests, b.requests) == (0, 4)
    a.health = 200
    await asyncio.sleep(0.3)
    for _ in range(4):
        assert (await proxy.post(CHAT, json=request())).status == 200
    assert a.requests == 2


async def test_ready_while_one_replica_of_every_upstream_answers(
    replicas: list[Replica], start_proxy: StartProxy
) -> None:
    a, b, _ = replicas
    proxy: Proxy = await start_proxy(fleet([a, b]))
    await b.kill()
    resp = await proxy.get("/-/ready")
    body = await resp.json()
    assert resp.status == 200
    shown = body["upstreams"]["m"]
    assert (shown["ok"], shown["detail"]) == (True, "1 of 2 replicas answer")
    assert shown["replicas"][a.url] == {"ok": True, "detail": "status 200"}
    assert shown["replicas"][b.url]["ok"] is False


async def test_one_of_three_killed_under_load_loses_only_the_streams_it_was_writing(
    replicas: list[Replica], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    """30 streams in flight, each client starting its next when one ends; b dies mid-load.
    What b was writing is cut (an error at its client, never a clean end); every other
    request gets its whole stream, those that met b dead retried elsewhere."""
    for r in replicas:
        r.chunks, r.pause = 20, 0.02
    proxy = await start_proxy(fleet(replicas, affinity="none"))
    outcomes: list[str] = []
    kill = asyncio.Event()

    async def client() -> None:
        while not kill.is_set() or len(outcomes) < 90:
            try:
                resp = await proxy.post(CHAT, json=request())
            except ClientError as exc:
                outcomes.append(type(exc).__name__)
                continue
            if resp.status != 200:
                outcomes.append(f"status {resp.status}")
                continue
            try:
                body = await resp.read()
            except ClientPayloadError:
                outcomes.append("cut")
                continue
            outcomes.append("complete" if body.endswith(b"data: [DONE]\n\n") else "clean cut")

    clients = [asyncio.create_task(client()) for _ in range(30)]
    try:
        await wait_for(lambda: len(outcomes) >= 30 and replicas[1].open >= 5)
        open_on_b = replicas[1].open
        await replicas[1].kill()
        kill.set()
        await asyncio.gather(*clients)
    finally:
        for task in clients:
            task.cancel()
    counts = {kind: outcomes.count(kind) for kind in set(outcomes)}
    assert counts.get("cut") == open_on_b, counts
    assert set(counts) == {"complete", "cut"}, counts
    lines = await logged(caplog, len(outcomes))
    assert any(line["attempts"] == 2 for line in lines)
    assert all(line["attempts"] == 1 for line in lines if line["end"] == "dropped")


@pytest.mark.parametrize("how", ["closes", "resets"])
async def test_a_replica_that_drops_the_request_before_its_head_is_retried_elsewhere(
    replicas: list[Replica], start_proxy: StartProxy, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    async def drop(conn: Conn) -> None:
        if how == "resets":
            conn.reset()
        else:
            conn.close()

    async with raw_upstream(drop) as broken:
        upstream = UpstreamSettings(name="m", urls=[broken.url, replicas[1].url], affinity="none")
        proxy = await start_proxy(upstream)
        resp = await proxy.post(CHAT, json=request())
        assert resp.status == 200
        assert served_by(await resp.text()) == "b"
    [line] = await logged(caplog)
    assert (line["attempts"], line["replica"]) == (2, replicas[1].url)
    assert len(broken.conns) == 1
