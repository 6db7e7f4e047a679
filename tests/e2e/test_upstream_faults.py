"""Upstream faults injected on purpose by a hand-driven server: what the client sees for each.

The documented outcomes: before the response head, 502 (dropped, reset, invalid head) or 504
(stalled past timeouts.first_byte); after it, every byte that arrived reaches the client, then
the client connection is closed without ending the response, so the client sees an error and
never a clean end or an added ``[DONE]``. tests/e2e/test_upstream_failures.py covers the clean close of a
chunked body through an aiohttp upstream; this module adds resets, the other framings, broken
framing and stalls at each point.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy
from tests.support.raw_upstream import (
    CHUNKED,
    CLOSE_DELIMITED,
    FRAMINGS,
    LENGTH,
    SSE_HEAD,
    Conn,
    Framing,
    raw_upstream,
    stream_then,
)
from tests.support.streams import arguments, content, read_until_error, recorded

CHAT = "/v1/chat/completions"
STREAM_REQUEST = {"model": "m", "stream": True}
ENDINGS: dict[str, Callable[[Conn], None]] = {"close": Conn.close, "reset": Conn.reset}

ONE_CALL = recorded("llamacpp-b9821-one-tool-call.sse")
TEXT = recorded("llamacpp-b9821-no-tools-text.sse")
# What the upstream manages to send before it dies, at each point of a real stream.
CUT_POINTS = {
    "between-events": TEXT[:5],
    "mid-event": [*TEXT[:5], TEXT[5][: len(TEXT[5]) // 2]],
    "mid-tool-call": ONE_CALL[:6],
    "mid-tool-call-event": [*ONE_CALL[:6], ONE_CALL[6][:80]],
}


def proxy_to(url: str, *, normalize: bool = True) -> UpstreamSettings:
    return UpstreamSettings(name="gpu", url=url, normalize=normalize)


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize(
    "sent", [b"", b"HTTP/1.1 200 OK\r\nContent-Ty"], ids=["before-any-byte", "mid-head"]
)
async def test_upstream_dying_before_its_response_head_is_502(
    sent: bytes, ending: str, start_proxy: StartProxy
) -> None:
    async def script(conn: Conn) -> None:
        await conn.send(sent)
        await asyncio.sleep(0.05)
        ENDINGS[ending](conn)

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url))
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        assert resp.status == 502
        error = (await resp.json())["error"]
        assert error["type"] == "upstream_error"
        assert "gpu" in error["message"]
        assert len(upstream.conns) == 1  # a new connection that fails is not retried


@pytest.mark.parametrize(
    "head",
    [
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * 20_000 + b"\r\n\r\n",
        b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(1000)) + b"\r\n",
        b"SSH-2.0-OpenSSH_9.6\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
    ],
    ids=["header-too-long", "too-many-headers", "not-http", "length-and-chunked"],
)
async def test_invalid_upstream_response_head_is_502_not_a_crash(
    head: bytes, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    async def script(conn: Conn) -> None:
        await conn.send(head)
        await conn.wait_peer_close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url))
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        assert resp.status == 502
        assert (await resp.json())["error"]["message"] == (
            "upstream 'gpu' sent an invalid response head"
        )
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def _drop_cases() -> list[tuple[Framing, str]]:
    # A clean close of a chunked body is tests/e2e/test_upstream_failures.py's case; a clean close of a
    # close-delimited body is its normal end (test below).
    return [
        (framing, ending)
        for framing in FRAMINGS
        for ending in ENDINGS
        if (framing, ending) not in ((CHUNKED, "close"), (CLOSE_DELIMITED, "close"))
    ]


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
@pytest.mark.parametrize("cut", CUT_POINTS)
@pytest.mark.parametrize(
    ("framing", "ending"), _drop_cases(), ids=lambda v: v if isinstance(v, str) else v.name
)
async def test_upstream_drop_after_the_head_reaches_the_client_as_an_error_after_every_byte(
    framing: Framing, ending: str, cut: str, normalize: bool, start_proxy: StartProxy
) -> None:
    sent = CUT_POINTS[cut]
    async with raw_upstream(stream_then(framing, sent, ENDINGS[ending])) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url, normalize=normalize))
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        assert resp.status == 200
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
    assert error is not None, "a dropped upstream must not look like a clean end"
    assert b"[DONE]" not in received
    body = b"".join(sent)
    if not normalize:
        assert received == body
    else:
        assert content(received) == content(body)
        assert arguments(received) == arguments(body)
        if not sent[-1].endswith(b"\n\n"):  # the unfinished event comes through raw
            assert sent[-1] in received


async def test_close_delimited_body_closed_cleanly_is_a_complete_stream(
    start_proxy: StartProxy,
) -> None:
    """Without a length or chunking, the upstream's FIN is how its body ends (RFC 9112 6.3)."""
    async with raw_upstream(stream_then(CLOSE_DELIMITED, TEXT, Conn.close)) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url, normalize=False))
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
    assert error is None
    assert received == b"".join(TEXT)


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
async def test_broken_chunk_framing_mid_body_aborts_without_waiting_for_the_idle_timeout(
    normalize: bool, start_proxy: StartProxy
) -> None:
    async def script(conn: Conn) -> None:
        await conn.send(SSE_HEAD + CHUNKED.head(0) + CHUNKED.frame(TEXT[0]))
        await asyncio.sleep(0.05)
        await conn.send(b"zz\r\n")  # not a chunk size
        await conn.wait_peer_close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(
            proxy_to(upstream.url, normalize=normalize), timeouts={"idle": 120}
        )
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=30)
        assert error is not None
        assert content(received) == content(TEXT[0])
        await asyncio.wait_for(upstream.conns[0].closed_by_peer.wait(), timeout=10)


async def test_upstream_stalled_inside_its_response_head_is_504(start_proxy: StartProxy) -> None:
    async def script(conn: Conn) -> None:
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Type: text/ev")
        await conn.wait_peer_close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url), timeouts={"first_byte": 0.3})
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        assert resp.status == 504
        assert (await resp.json())["error"]["type"] == "upstream_timeout"
        # The abandoned upstream connection is closed, not left to hang.
        await asyncio.wait_for(upstream.conns[0].closed_by_peer.wait(), timeout=10)


@pytest.mark.parametrize("normalize", [False, True], ids=["passthrough", "rewriting"])
async def test_upstream_silent_after_its_head_aborts_after_the_idle_timeout(
    normalize: bool, start_proxy: StartProxy
) -> None:
    async def script(conn: Conn) -> None:
        await conn.send(SSE_HEAD + CHUNKED.head(0))
        await conn.wait_peer_close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(
            proxy_to(upstream.url, normalize=normalize), timeouts={"idle": 0.3}
        )
        resp = await proxy.post(CHAT, json=STREAM_REQUEST)
        assert resp.status == 200
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
        assert (received, error is not None) == (b"", True)
        await asyncio.wait_for(upstream.conns[0].closed_by_peer.wait(), timeout=10)


async def test_models_listing_skips_an_upstream_whose_body_breaks_off(
    start_proxy: StartProxy,
) -> None:
    listing = b'{"object":"list","data":[{"id":"good-model"}]}'

    async def good(conn: Conn) -> None:
        await conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(listing), listing)
        )

    async def broken(conn: Conn) -> None:
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n" + listing[:20])
        conn.reset()

    async with raw_upstream(good) as up_good, raw_upstream(broken) as up_broken:
        proxy = await start_proxy(
            UpstreamSettings(name="broken", url=up_broken.url, models=["b"]),
            UpstreamSettings(name="good", url=up_good.url, models=["g"]),
        )
        resp = await proxy.get("/v1/models")
        assert resp.status == 200
        assert [m["id"] for m in (await resp.json())["data"]] == ["good-model"]


def answer_then_end_on_reuse(ending: str) -> Callable[[Conn], Awaitable[None]]:
    """Answer the first request of each connection; end the connection when a second comes.

    That is what a proxy sees when an upstream's keep-alive timer fires just as the proxy
    reuses the idle connection.
    """

    async def script(conn: Conn) -> None:
        await conn.send(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await conn.reader.readuntil(b"\r\n\r\n")
        ENDINGS[ending](conn)

    return script


@pytest.mark.parametrize("ending", ENDINGS)
async def test_a_request_meeting_a_stale_reused_connection_is_sent_again(
    ending: str, start_proxy: StartProxy
) -> None:
    async with raw_upstream(answer_then_end_on_reuse(ending)) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url))
        for _ in range(3):
            resp = await proxy.post(CHAT, json={"model": "m"})
            assert (resp.status, await resp.read()) == (200, b"ok")
        assert len(upstream.conns) == 3


async def test_a_streamed_upload_meeting_a_stale_connection_is_not_replayed(
    start_proxy: StartProxy,
) -> None:
    async with raw_upstream(answer_then_end_on_reuse("close")) as upstream:
        proxy = await start_proxy(proxy_to(upstream.url))
        assert (await proxy.post(CHAT, json={"model": "m"})).status == 200
        resp = await proxy.post(
            "/v1/audio/transcriptions", data=b"\0" * 1000, headers={"Content-Type": "audio/wav"}
        )
        assert resp.status == 502
        assert len(upstream.conns) == 1


@pytest.mark.parametrize(
    ("path", "settings"),
    [
        (CHAT, {}),
        ("/v1/responses", {"responses": "native"}),
        ("/v1/messages", {"messages": "native"}),
    ],
    ids=["chat", "responses-native", "messages-native"],
)
async def test_a_json_answer_silent_mid_body_is_cut_after_the_idle_timeout(
    path: str, settings: dict[str, str], start_proxy: StartProxy
) -> None:
    # A rewritten JSON answer is read whole before it is repaired; a body that stops coming
    # must not hold the request (and its connection) past timeouts.idle.
    sent = b'{"id":"chatcmpl-1","object":"chat.completion","choi'

    async def script(conn: Conn) -> None:
        await conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            + LENGTH.head(len(sent) + 200)
            + sent
        )
        await conn.wait_peer_close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(
            UpstreamSettings(name="gpu", url=upstream.url, **settings), timeouts={"idle": 0.3}
        )
        resp = await asyncio.wait_for(
            proxy.post(path, json={"model": "m", "max_tokens": 5, "input": "hi"}), timeout=10
        )
        assert resp.status == 200
        received, error = await asyncio.wait_for(read_until_error(resp), timeout=10)
        assert (received, error is not None) == (sent, True)
        await asyncio.wait_for(upstream.conns[0].closed_by_peer.wait(), timeout=10)
