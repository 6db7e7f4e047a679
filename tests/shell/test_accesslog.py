"""The access log: one JSON line per proxied request, with what happened to it."""

from __future__ import annotations

import asyncio
import io
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import ClientSession, web

from proxy.settings import UpstreamSettings
from proxy.shell.accesslog import (
    ACCESS_LOGGER,
    FLUSH_EVERY,
    MAX_HELD_BYTES,
    PIPE_BUF,
    AccessWriter,
    JsonAccessFormatter,
    configure_logging,
    whole_line_writes,
)
from tests.conftest import UPSTREAM_FIXTURES, StartProxy, StartUpstream, upstream_url
from tests.support.accesslog import access_records, logged
from tests.support.sockets import free_port
from tests.support.streams import read_until_error
from tests.support.upstreams import AnyUpstream, replay_app

CHAT = "/v1/chat/completions"


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root, access = logging.getLogger(), logging.getLogger(ACCESS_LOGGER)
    saved = (root.level, list(root.handlers), list(access.handlers), access.propagate)
    yield
    root.setLevel(saved[0])
    root.handlers[:] = saved[1]
    access.handlers[:] = saved[2]
    access.propagate = saved[3]


async def test_one_record_per_request_with_its_fields(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    body = (UPSTREAM_FIXTURES / "llamacpp-b9821-parallel-tool-calls.sse").read_bytes()
    upstream = await start_upstream(replay_app(body))
    proxy = await start_proxy(
        UpstreamSettings(name="llama", url=upstream_url(upstream), normalize=False)
    )
    resp = await proxy.post(
        CHAT, json={"model": "qwen", "stream": True}, headers={"X-Request-Id": "req-42"}
    )
    assert await resp.read() == body
    [record] = await logged(caplog)
    assert record["request_id"] == resp.headers["X-Request-Id"] == "req-42"
    assert (record["method"], record["path"], record["upstream"], record["model"]) == (
        "POST",
        CHAT,
        "llama",
        "qwen",
    )
    assert record["status"] == 200
    assert record["end"] == "complete"
    assert record["bytes"] == record["bytes_upstream"] == len(body)
    assert 1 <= record["chunks"] <= body.count(b"\n\n")
    assert 0 <= record["ttfb_ms"] <= record["duration_ms"]
    assert record["repairs"] == {}
    assert record["upstream_errors"] == []
    assert record["rewritten"] is False


async def test_request_refused_before_routing_is_logged_without_an_upstream(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    a, b = await start_upstream(replay_app(b"")), await start_upstream(replay_app(b""))
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(a), models=["qwen*"]),
        UpstreamSettings(name="b", url=upstream_url(b), models=["llama*"]),
    )
    resp = await proxy.post(CHAT, json={"model": "gpt-4"})
    assert resp.status == 404
    [record] = await logged(caplog)
    assert (record["upstream"], record["model"], record["status"]) == ("(none)", "gpt-4", 404)
    # issue 26 item 17: the error body the proxy wrote is counted (it was 0 bytes, ttfb null)
    assert record["bytes"] == len(await resp.read()) > 0
    assert record["ttfb_ms"] is not None


async def test_client_that_leaves_mid_stream_is_logged_once_as_gone(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    first = b'data: {"object":"chat.completion.chunk","choices":[]}\n\n'

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(first)
        await asyncio.sleep(30)
        return response

    app = web.Application()
    app.router.add_post(CHAT, endless)
    proxy = await start_proxy(await start_upstream(app))
    resp = await proxy.post(CHAT, json={"model": "m", "stream": True})
    await resp.content.readuntil(b"\n\n")
    resp.close()
    [record] = await logged(caplog)
    assert (record["status"], record["end"]) == (200, "client_gone")
    assert record["bytes"] == len(first)
    await asyncio.sleep(0.1)
    assert len(access_records(caplog)) == 1


@pytest.mark.usefixtures("restore_logging")
async def test_log_line_is_json_and_follows_the_configured_level(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(replay_app(b"data: [DONE]\n\n")))
    quiet = io.StringIO()
    configure_logging("warning", quiet)
    await (await proxy.post(CHAT, json={"model": "m", "stream": True})).read()
    stream = io.StringIO()
    configure_logging("info", stream)
    await (await proxy.post(CHAT, json={"model": "m", "stream": True})).read()
    for _ in range(100):
        if stream.getvalue():
            break
        await asyncio.sleep(0.02)
    assert quiet.getvalue() == ""
    [line] = stream.getvalue().splitlines()
    entry = orjson.loads(line)
    assert entry["time"].endswith("Z")
    assert (entry["status"], entry["upstream"], entry["model"]) == (200, "up0", "m")


OPENING = (
    b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
    b'[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather",'
    b'"arguments":""}}]}}]}\n\n'
)
# old llama.cpp: the name again on an argument delta (Q1), a chunk without `object`
NAME_REPEATED = (
    OPENING
    + b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
    b'[{"index":0,"function":{"name":"get_weather","arguments":"{\\"city\\": \\"Paris\\"}"}}]}}]}\n\n'
    b'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n'
    b"data: [DONE]\n\n"
)
# the body ends cleanly inside the arguments: no finish, no [DONE]
CUT_IN_THE_ARGUMENTS = (
    OPENING
    + b'data: {"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"tool_calls":'
    b'[{"index":0,"function":{"arguments":"{\\"city\\": \\"Par"}}]}}]}\n\n'
)


@pytest.mark.usefixtures("restore_logging")
@pytest.mark.parametrize(
    ("body", "repairs"),
    [
        (NAME_REPEATED, {"name-repeated": 1, "object-missing": 1}),
        (
            CUT_IN_THE_ARGUMENTS,
            {"args-not-json": 1, "args-truncated": 1, "missing-done": 1, "no-finish-chunk": 1},
        ),
    ],
    ids=["name-repeated", "cut-in-the-arguments"],
)
async def test_access_line_of_a_rewritten_stream_names_its_repairs(
    body: bytes, repairs: dict[str, int], start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    proxy = await start_proxy(await start_upstream(replay_app(body)))
    stream = io.StringIO()
    configure_logging("info", stream)
    resp = await proxy.post(CHAT, json={"model": "m", "stream": True})
    out = await resp.read()
    assert out.count(b"get_weather") == 1
    for _ in range(100):
        if stream.getvalue():
            break
        await asyncio.sleep(0.02)
    [line] = stream.getvalue().splitlines()
    entry = orjson.loads(line)
    assert (entry["path"], entry["status"], entry["end"]) == (CHAT, 200, "complete")
    assert entry["rewritten"] is True
    assert entry["repairs"] == repairs


async def test_served_process_writes_json_access_lines_and_no_aiohttp_ones(
    start_upstream: StartUpstream, tmp_path: Path
) -> None:
    upstream = await start_upstream(replay_app(b"data: [DONE]\n\n"))
    port = free_port()
    config = tmp_path / "proxy.toml"
    config.write_text(f'[[upstreams]]\nname = "u"\nurl = "{upstream_url(upstream)}"\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy", "--config", str(config), "--port", str(port),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        async with ClientSession() as session:
            for _ in range(200):
                try:
                    async with session.get(f"http://127.0.0.1:{port}/-/health") as health:
                        if health.status == 200:
                            break
                except OSError:
                    await asyncio.sleep(0.05)
            url = f"http://127.0.0.1:{port}{CHAT}"
            async with session.post(url, json={"model": "m", "stream": True}) as resp:
                assert await resp.read() == b"data: [DONE]\n\n"
    finally:
        process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=10)
    assert b"--- Logging error ---" not in stderr  # another process: the fixture cannot see it
    lines = stderr.decode().splitlines()
    access = [orjson.loads(line) for line in lines if line.startswith("{")]
    assert [(a["path"], a["status"]) for a in access] == [(CHAT, 200)]
    assert "worker" not in access[0]  # named only when there are several (test_workers.py)
    assert not [line for line in lines if f'"POST {CHAT}' in line or "/-/health" in line]


COMPLETION = orjson.dumps(
    {
        "id": "c1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sunny."},
                "finish_reason": "stop",
            }
        ],
    }
)
NATIVE_MESSAGE = orjson.dumps(
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [{"type": "text", "text": "Sunny."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 2},
    }
)


@pytest.mark.parametrize(
    ("mode", "path", "body"),
    [
        ("translate", "/v1/messages", COMPLETION),
        ("translate", "/v1/responses", COMPLETION),
        ("native", "/v1/messages", NATIVE_MESSAGE),
    ],
    ids=["messages-translate", "responses-translate", "messages-native"],
)
async def test_a_whole_answer_in_another_protocol_counts_its_bytes_both_ways(
    mode: str,
    path: str,
    body: bytes,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = await start_upstream(replay_app(body, content_type="application/json"))
    key = "messages" if path == "/v1/messages" else "responses"
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(upstream), **{key: mode}))
    request = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    if key == "responses":
        request = {"model": "m", "input": "hi"}
    resp = await proxy.post(path, json=request)
    assert resp.status == 200
    answer = await resp.read()
    [record] = await logged(caplog)
    assert (record["bytes_upstream"], record["bytes"]) == (len(body), len(answer))
    assert record["ttfb_ms"] is not None


# -- issue 26 item 17: the proxy's own bodies and its failures ---------------------------------


@pytest.mark.parametrize(
    ("method", "path", "body", "status"),
    [
        ("POST", "/v1/responses", {"model": "m"}, 400),  # no input: the proxy's own 400
        ("POST", "/v1/messages/count_tokens", {"model": "m", "messages": []}, 200),
        ("GET", "/v1/models", None, 200),
        ("POST", "/v1/chat/completions", {"model": "nobody"}, 404),
    ],
)
async def test_a_body_of_the_proxys_own_making_is_counted(
    method: str,
    path: str,
    body: dict[str, Any] | None,
    status: int,
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(
            name="u", url=upstream_url(await start_upstream(upstream.app)), models=["m"]
        )
    )
    resp = await proxy.request(method, path, json=body)
    assert resp.status == status
    answer = await resp.read()
    [record] = await logged(caplog)
    assert record["status"] == status
    assert record["bytes"] == len(answer) > 0
    assert record["chunks"] == 1


async def test_a_closing_answer_is_counted_too(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(await start_upstream(upstream.app))),
        timeouts={"request_body": 0.2},
    )
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{"
    )
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408")
    [record] = await logged(caplog)
    assert record["status"] == 408
    assert record["bytes"] == len(answer.partition(b"\r\n\r\n")[2]) > 0


async def test_a_failure_of_the_proxy_mid_stream_cuts_it_and_the_line_says_so(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    fed: list[bytes] = []

    def broken(self: object, chunk: bytes) -> list[bytes]:
        # a bug in the repair, met once the response has started: put in, since no client
        # can cause one
        fed.append(chunk)
        raise RuntimeError("a bug")

    monkeypatch.setattr("proxy.core.protocols.chat.sse_stream.ChatSSEStream.feed", broken)
    body = (UPSTREAM_FIXTURES / "llamacpp-b9821-parallel-tool-calls.sse").read_bytes()
    proxy = await start_proxy(await start_upstream(replay_app(body)))
    resp = await proxy.post(CHAT, json={"model": "m", "stream": True})
    assert resp.status == 200
    _, error = await read_until_error(resp)
    assert error is not None, "the cut must show"
    assert fed
    [record] = await logged(caplog)
    assert (record["status"], record["end"]) == (200, "proxy_error")
    failures = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert len(failures) == 1
    assert failures[0].exc_info is not None
    assert record["request_id"] in failures[0].getMessage()


async def test_a_control_character_in_a_path_is_escaped_in_the_warning_line(
    start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    # an upstream that is not there: the 502 is logged as a warning naming the path
    proxy = await start_proxy(UpstreamSettings(name="u", url="http://127.0.0.1:9"))
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    writer.write(
        b"GET /v1/x%0D2026-01-01%20ERROR%20forged HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 502")
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    line = warning.getMessage()
    assert "\r" not in line
    assert "\n" not in line
    assert "/v1/x\\r2026-01-01 ERROR forged" in line


# -- issue 29 item 1: the access line written without the logging machinery ---------------------


async def test_a_line_is_held_and_written_within_the_flush_bound() -> None:
    out = io.StringIO()
    writer = AccessWriter(out)
    writer.put({"request_id": "r1", "status": 200})
    assert out.getvalue() == ""  # held: nothing is written on the request's path
    held_at = asyncio.get_running_loop().time()
    while not out.getvalue():
        await asyncio.sleep(0.005)
        assert asyncio.get_running_loop().time() - held_at < FLUSH_EVERY + 0.5
    [line] = out.getvalue().splitlines()
    entry = orjson.loads(line)
    assert list(entry) == ["time", "request_id", "status"]
    assert entry["time"].endswith("Z")


async def test_a_line_is_written_as_logging_wrote_it() -> None:
    out = io.StringIO()
    writer = AccessWriter(out, worker=3)
    fields = {"request_id": "r1", "path": "/v1/x\r\n", "model": "é", "repairs": {"a": 1}}
    writer.put(fields)
    writer.flush()
    record = logging.LogRecord(ACCESS_LOGGER, logging.INFO, __file__, 0, "access", (), None)
    record.access = fields
    expected = orjson.loads(JsonAccessFormatter(worker=3).format(record))
    written = orjson.loads(out.getvalue())
    assert written.keys() == expected.keys()
    assert list(written)[:2] == ["time", "worker"]
    assert {k: v for k, v in written.items() if k != "time"} == {
        k: v for k, v in expected.items() if k != "time"
    }


async def test_held_lines_past_the_size_bound_are_written_at_once() -> None:
    out = io.StringIO()
    writer = AccessWriter(out)
    line = {"path": "/" + "a" * 1000}
    while not out.getvalue():
        writer.put(line)
    assert len(out.getvalue()) >= MAX_HELD_BYTES
    assert all(orjson.loads(x) for x in out.getvalue().splitlines())


def test_a_write_holds_whole_lines_within_pipe_buf() -> None:
    lines = [b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i * 37 % 900)) for i in range(300)]
    lines.insert(100, b'{"long":"' + b"y" * (3 * PIPE_BUF) + b'"}\n')
    data = b"".join(lines)
    writes = whole_line_writes(data)
    assert b"".join(writes) == data
    assert all(w.endswith(b"\n") for w in writes)
    assert all(len(w) <= PIPE_BUF or w.count(b"\n") == 1 for w in writes)
    assert len(writes) > 1


async def test_each_write_to_a_pipe_is_whole_lines_within_pipe_buf() -> None:
    # a pipe in packet mode (O_DIRECT): each read returns one write, as the kernel took it
    read_end, write_end = os.pipe2(os.O_DIRECT)
    with open(write_end, "w") as stream:  # noqa: ASYNC230 (a pipe, read below)
        writer = AccessWriter(stream)
        for i in range(30):  # a pipe holds 16 packets: fewer writes than that, read after
            writer.put_line(b'{"n":%d,"pad":"%s"}\n' % (i, b"x" * (i * 37 % 1500)))
        writer.flush()
    packets = []
    while packet := os.read(read_end, 1 << 16):
        packets.append(packet)
    os.close(read_end)
    assert len(packets) > 1
    assert all(p.endswith(b"\n") and len(p) <= PIPE_BUF for p in packets)
    assert len(b"".join(packets).splitlines()) == 30


def test_without_a_loop_a_line_is_written_at_once() -> None:
    out = io.StringIO()
    AccessWriter(out).put({"request_id": "r1"})
    assert orjson.loads(out.getvalue())["request_id"] == "r1"


@pytest.mark.usefixtures("restore_logging")
async def test_many_concurrent_requests_each_leave_one_whole_line(
    start_upstream: StartUpstream, start_proxy: StartProxy, tmp_path: Path
) -> None:
    proxy = await start_proxy(await start_upstream(replay_app(b"data: [DONE]\n\n")))
    log = tmp_path / "access.log"
    with log.open("w") as stream:
        configure_logging("info", stream)
        paths = [f"/v1/{'p' * (i * 53 % 3000)}/{i}" for i in range(200)]

        async def one(path: str) -> None:
            resp = await proxy.post(path, json={"model": "m", "stream": True})
            await resp.read()

        await asyncio.gather(*(one(p) for p in paths))
        for _ in range(100):
            if log.read_text().count("\n") >= len(paths):
                break
            await asyncio.sleep(0.02)
    entries = [orjson.loads(line) for line in log.read_text().splitlines()]
    assert sorted(e["path"] for e in entries) == sorted(paths)


async def test_a_stopped_process_writes_the_lines_it_held(
    start_upstream: StartUpstream, tmp_path: Path
) -> None:
    upstream = await start_upstream(replay_app(b"data: [DONE]\n\n"))
    port = free_port()
    config = tmp_path / "proxy.toml"
    config.write_text(f'[[upstreams]]\nname = "u"\nurl = "{upstream_url(upstream)}"\n')
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "proxy", "--config", str(config), "--port", str(port),
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    terminated = False
    try:
        async with ClientSession() as session:
            for _ in range(200):
                try:
                    async with session.get(f"http://127.0.0.1:{port}/-/health") as health:
                        if health.status == 200:
                            break
                except OSError:
                    await asyncio.sleep(0.05)
            url = f"http://127.0.0.1:{port}{CHAT}"
            for _ in range(5):
                async with session.post(url, json={"model": "m", "stream": True}) as resp:
                    await resp.read()
            process.terminate()  # at once: the lines are still held
            terminated = True
    finally:
        # once: a second SIGTERM that lands after the shutdown removed its handler kills the
        # process (-15) instead of letting it end
        if process.returncode is None and not terminated:
            process.terminate()
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=10)
    assert process.returncode == 0
    access = [orjson.loads(line) for line in stderr.decode().splitlines() if line.startswith("{")]
    assert [a["path"] for a in access] == [CHAT] * 5
