"""Attacks on the proxy, each with the refusal docs/operations.md documents.

Requests that a client library would normalise (absolute-form targets, dot segments, odd Host
headers, repeated or oversized headers) are sent as raw bytes over a socket. A *canary*
server stands for "another host": it must never see a request.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict, CIMultiDictProxy

from proxy.core.errors import ConfigError
from proxy.settings import UpstreamSettings, load_settings
from proxy.shell.auth import ClientKeys
from tests.conftest import StartProxy, StartUpstream, port_of, template_probe, upstream_url
from tests.support.raw_upstream import Conn, raw_upstream
from tests.support.upstreams import stalling_app


class Recorder:
    """An upstream that answers 200 and remembers each request's path and headers."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, CIMultiDictProxy[str]]] = []

    async def handler(self, request: web.Request) -> web.Response:
        if template_probe(request.method, request.path, request.headers):
            return web.Response(status=404)
        self.seen.append((request.raw_path, request.headers))
        return web.Response(text="upstream", headers={"X-Upstream": "yes"})

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handler)
        return app

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        assert len(self.seen) == 1, self.seen
        return self.seen[0][1]


async def raw_request(port: int, head: bytes, body: bytes = b"") -> tuple[int, bytes, bytes]:
    """Send ``head`` (request line and headers, without the blank line); return the answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(head + b"\r\nConnection: close\r\n\r\n" + body)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=10)
    writer.close()
    status_line, _, rest = answer.partition(b"\r\n")
    headers, _, content = rest.partition(b"\r\n\r\n")
    return int(status_line.split()[1]), headers, content


ProxyToRecorder = Callable[
    ..., Awaitable[tuple[Recorder, TestClient[web.Request, web.Application]]]
]


@pytest.fixture
def proxy_to_recorder(start_upstream: StartUpstream, start_proxy: StartProxy) -> ProxyToRecorder:
    """Start a Recorder upstream and the proxy in front of it (settings as start_proxy's)."""

    async def start(
        **settings: Any,
    ) -> tuple[Recorder, TestClient[web.Request, web.Application]]:
        upstream = Recorder()
        return upstream, await start_proxy(await start_upstream(upstream.app()), **settings)

    return start


@pytest.fixture
async def canary(start_upstream: StartUpstream) -> tuple[Recorder, TestServer]:
    recorder = Recorder()
    return recorder, await start_upstream(recorder.app())


# -- not an open proxy ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "status"),
    [
        (b"http://{canary}/v1/models", 400),
        (b"http://{canary}/v1/chat/completions", 400),
        (b"https://{canary}/v1/models", 400),
        (b"http://{canary}", 404),  # no path at all: aiohttp's router finds no route
    ],
)
async def test_absolute_form_request_targets_are_refused(
    target: bytes,
    status: int,
    canary: tuple[Recorder, TestServer],
    proxy_to_recorder: ProxyToRecorder,
) -> None:
    recorder, canary_server = canary
    upstream, proxy = await proxy_to_recorder()
    target = target.replace(b"{canary}", b"127.0.0.1:%d" % port_of(canary_server))
    answer = await raw_request(
        port_of(proxy),
        b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1:%d" % port_of(canary_server),
    )
    assert answer[0] == status
    if status == 400:
        assert b"not a forward proxy" in answer[2]
    assert recorder.seen == upstream.seen == []


@pytest.mark.parametrize(
    ("request_line", "statuses"),
    [
        (b"CONNECT 127.0.0.1:{canary} HTTP/1.1", (405,)),
        (b"OPTIONS * HTTP/1.1", (400, 404)),
        (b"GET 127.0.0.1:{canary}/v1/models HTTP/1.1", (400, 404)),
    ],
)
async def test_authority_and_asterisk_form_targets_are_refused(
    request_line: bytes,
    statuses: tuple[int, ...],
    canary: tuple[Recorder, TestServer],
    proxy_to_recorder: ProxyToRecorder,
) -> None:
    recorder, canary_server = canary
    upstream, proxy = await proxy_to_recorder()
    line = request_line.replace(b"{canary}", b"%d" % port_of(canary_server))
    status, _, _ = await raw_request(port_of(proxy), line + b"\r\nHost: x")
    assert status in statuses
    assert recorder.seen == upstream.seen == []


@pytest.mark.parametrize(
    "host",
    [b"127.0.0.1:{canary}", b"evil.example", b"127.0.0.1:{canary}@evil.example", b""],
)
async def test_the_host_header_never_chooses_where_a_request_goes(
    host: bytes,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, canary_server = canary
    upstream = Recorder()
    upstream_server = await start_upstream(upstream.app())
    proxy = await start_proxy(upstream_server)
    host = host.replace(b"{canary}", b"%d" % port_of(canary_server))
    status, _, body = await raw_request(
        port_of(proxy),
        b"GET /v1/props HTTP/1.1\r\nHost: "
        + host
        + b"\r\nX-Forwarded-Host: 127.0.0.1:%d" % port_of(canary_server),
    )
    assert (status, body) == (200, b"upstream")
    assert recorder.seen == []
    assert upstream.headers["Host"] == f"127.0.0.1:{upstream_server.port}"
    assert "X-Forwarded-Host" not in upstream.headers


@pytest.mark.parametrize(
    "path",
    [
        b"/v1/../admin",
        b"/v1/%2e%2e/admin",
        b"/v1/%2E%2E%2Fadmin",
        b"/v1/%252e%252e/admin",
        b"/v1/..%5cadmin",
        b"/v1\\..\\admin",
        b"/v1/..;/admin",
        b"/v1/.%2e/admin",
        b"/-/health/../../admin",
        b"/v1/./models",
    ],
)
async def test_paths_that_climb_out_of_the_upstream_prefix_are_refused(
    path: bytes, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = Recorder()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/engine")))
    status, _, body = await raw_request(port_of(proxy), b"GET " + path + b" HTTP/1.1\r\nHost: x")
    assert status == 400
    assert b"dot segments" in body
    assert upstream.seen == []


@pytest.mark.parametrize("path", [b"//127.0.0.1/x", b"/@evil.example/x", b"/v1/a..b/%2F"])
async def test_odd_but_harmless_paths_stay_under_the_upstream_prefix(
    path: bytes,
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
) -> None:
    recorder, _ = canary
    upstream = Recorder()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(UpstreamSettings(name="u", url=upstream_url(server, "/engine")))
    status, _, _ = await raw_request(port_of(proxy), b"GET " + path + b" HTTP/1.1\r\nHost: x")
    assert status == 200
    assert upstream.seen[0][0] == "/engine" + path.decode()
    assert recorder.seen == []


def header_lines(raw: bytes) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict()
    for line in raw.split(b"\r\n"):
        name, _, value = line.partition(b":")
        headers.add(name.decode(), value.strip().decode())
    return headers


@pytest.mark.parametrize(
    "framing",
    [
        b"Content-Length: 5\r\nTransfer-Encoding: chunked",
        b"Content-Length: 14\r\nContent-Length: 5",
        b"Transfer-Encoding: xchunked",
        b"Transfer-Encoding: chunked, identity",
        b"Transfer-Encoding : chunked",
        b"Content-Length: +14",
    ],
    ids=["cl-and-te", "two-lengths", "te-unknown", "te-chunked-not-last", "te-space", "cl-sign"],
)
async def test_requests_with_ambiguous_framing_are_refused_not_forwarded(
    framing: bytes, proxy_to_recorder: ProxyToRecorder
) -> None:
    """Request smuggling needs two parsers to disagree on where a body ends; the proxy's
    parser refuses every ambiguous framing, and its own requests upstream are framed anew."""
    upstream, proxy = await proxy_to_recorder()
    body = b'{"model": "m"}'
    status, _, _ = await raw_request(
        port_of(proxy),
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + framing,
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body) if b"chunked" in framing else body,
    )
    assert status == 400
    assert upstream.seen == []


# -- inbound authentication ----------------------------------------------------------------

KEYS = ("sk-proxy-first-key-0123456789", "sk-proxy-second-key-abcdefghij")


@pytest.fixture
def keys_env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.setenv("PROXY_CLIENT_KEYS", ", ".join(KEYS))
    return {"api_keys_env": "PROXY_CLIENT_KEYS"}


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "Bearer sk-wrong",
        f"Bearer {KEYS[0]}x",
        f"Bearer {KEYS[0][:-1]}",
        f"Basic {KEYS[0]}",
        KEYS[0],
        f"Bearer {KEYS[0]}, Bearer {KEYS[1]}",
    ],
)
async def test_requests_without_an_accepted_key_are_401_in_the_openai_shape(
    authorization: str | None, keys_env: dict[str, str], proxy_to_recorder: ProxyToRecorder
) -> None:
    upstream, proxy = await proxy_to_recorder(auth=keys_env)
    headers = {} if authorization is None else {"Authorization": authorization}
    for method, path in [("POST", "/v1/chat/completions"), ("GET", "/v1/models"), ("GET", "/x")]:
        resp = await proxy.request(method, path, headers=headers, json={"model": "m"})
        assert resp.status == 401
        assert resp.headers["WWW-Authenticate"] == "Bearer"
        error = (await resp.json())["error"]
        assert (error["type"], error["code"]) == ("authentication_error", 401)
    assert upstream.seen == []


@pytest.mark.parametrize("key", KEYS)
async def test_each_accepted_key_passes_and_is_never_forwarded(
    key: str, keys_env: dict[str, str], proxy_to_recorder: ProxyToRecorder
) -> None:
    upstream, proxy = await proxy_to_recorder(auth=keys_env)
    resp = await proxy.post(
        "/v1/chat/completions", json={"model": "m"}, headers={"Authorization": f"bearer  {key} "}
    )
    assert resp.status == 200
    assert "Authorization" not in upstream.headers
    assert key not in str(upstream.headers)


async def test_with_an_upstream_key_the_client_key_is_replaced_by_it(
    keys_env: dict[str, str],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("UPSTREAM_KEY", "sk-upstream-secret")
    upstream = Recorder()
    server = await start_upstream(upstream.app())
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(server), api_key_env="UPSTREAM_KEY"),
        auth=keys_env,
    )
    resp = await proxy.get("/props", headers={"Authorization": f"Bearer {KEYS[1]}"})
    assert resp.status == 200
    assert upstream.headers.getall("Authorization") == ["Bearer sk-upstream-secret"]


async def test_health_stays_open_and_nothing_else_does(
    keys_env: dict[str, str], proxy_to_recorder: ProxyToRecorder
) -> None:
    upstream, proxy = await proxy_to_recorder(auth=keys_env)
    assert (await proxy.get("/-/health")).status == 200
    assert (await proxy.get("/-/health?verbose=1")).status == 200
    for path in (b"//-/health", b"/-/health/", b"/-/healthz", b"/-/unknown", b"/-/Health"):
        status, _, _ = await raw_request(port_of(proxy), b"GET " + path + b" HTTP/1.1\r\nHost: x")
        assert status == 401, path
    assert upstream.seen == []


async def test_keys_come_from_a_file_with_comments(
    tmp_path: Path, proxy_to_recorder: ProxyToRecorder
) -> None:
    keys_file = tmp_path / "keys"
    keys_file.write_text(f"# team a\n{KEYS[0]}\n\n  {KEYS[1]}  \n# {KEYS[0]}-revoked\n")
    _, proxy = await proxy_to_recorder(auth={"api_keys_file": keys_file})
    for key, status in [(KEYS[0], 200), (KEYS[1], 200), (f"{KEYS[0]}-revoked", 401)]:
        resp = await proxy.get("/props", headers={"Authorization": f"Bearer {key}"})
        assert resp.status == status


@pytest.mark.parametrize(
    ("auth", "env", "file_text", "message"),
    [
        ({"api_keys_env": "NOPE_KEYS"}, None, None, "auth.api_keys_env: .*NOPE_KEYS is not set"),
        ({"api_keys_env": "EMPTY_KEYS"}, " , ", None, "holds no key"),
        ({"api_keys_file": "missing"}, None, None, "auth.api_keys_file: cannot read"),
        ({"api_keys_file": "keys"}, None, "# only a comment\n\n", "holds no key"),
        ({"api_keys_file": "keys"}, None, "two words\n", "has spaces"),
    ],
)
def test_an_unusable_key_source_stops_the_start(
    auth: dict[str, str],
    env: str | None,
    file_text: str | None,
    message: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if env is not None:
        monkeypatch.setenv("EMPTY_KEYS", env)
    if "api_keys_file" in auth:
        auth = {"api_keys_file": str(tmp_path / auth["api_keys_file"])}
        if file_text is not None:
            (tmp_path / "keys").write_text(file_text)
    with pytest.raises(ConfigError, match=message):
        load_settings(None, auth=auth)


def test_every_configured_key_is_compared_whichever_matches(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No early exit: the time taken does not tell which key (or whether one) matched."""
    calls: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append((a, b))
        return real(a, b)

    monkeypatch.setattr(hmac, "compare_digest", counting)
    keys = ClientKeys([f"key-{i}" for i in range(5)])
    for presented in ("key-0", "key-4", "nope", ""):
        calls.clear()
        keys.accepts(f"Bearer {presented}")
        assert len(calls) == 5
        assert {len(a) for a, _ in calls} == {len(b) for _, b in calls} == {32}


# -- upstream credentials ------------------------------------------------------------------


async def test_each_upstream_gets_only_its_own_key_replacing_every_client_value(
    start_upstream: StartUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEY_A", "sk-secret-a")
    monkeypatch.setenv("KEY_B", "sk-secret-b")
    recorders = {name: Recorder() for name in "abc"}
    servers = {name: await start_upstream(r.app()) for name, r in recorders.items()}
    proxy = await start_proxy(
        UpstreamSettings(
            name="a", url=upstream_url(servers["a"]), models=["a"], api_key_env="KEY_A"
        ),
        UpstreamSettings(
            name="b", url=upstream_url(servers["b"]), models=["b"], api_key_env="KEY_B"
        ),
        UpstreamSettings(name="c", url=upstream_url(servers["c"]), models=["c"]),
    )
    for model in "abc":
        body = b'{"model": "%s"}' % model.encode()
        status, _, _ = await raw_request(
            port_of(proxy),
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
            b"\r\nAuthorization: Bearer client-one\r\nauthorization: Bearer client-two"
            b"\r\nContent-Length: %d" % len(body),
            body,
        )
        assert status == 200
    assert recorders["a"].headers.getall("Authorization") == ["Bearer sk-secret-a"]
    assert recorders["b"].headers.getall("Authorization") == ["Bearer sk-secret-b"]
    # Without a configured key the client's own header passes through, as it came.
    assert recorders["c"].headers.getall("Authorization") == [
        "Bearer client-one",
        "Bearer client-two",
    ]


async def test_an_upstream_redirect_is_returned_never_followed_with_credentials(
    canary: tuple[Recorder, TestServer],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorder, canary_server = canary
    location = f"http://127.0.0.1:{port_of(canary_server)}/steal"

    async def redirect(request: web.Request) -> web.Response:
        raise web.HTTPFound(location)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", redirect)
    monkeypatch.setenv("KEY_A", "sk-secret-a")
    server = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(server), api_key_env="KEY_A")
    )
    resp = await proxy.post("/v1/chat/completions", json={"model": "m"}, allow_redirects=False)
    assert resp.status == 302
    assert resp.headers["Location"] == location
    assert recorder.seen == []


async def test_upstream_keys_never_reach_logs_or_error_bodies(
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    secret = "sk-never-shown-7f3a"
    monkeypatch.setenv("KEY_A", secret)

    ok = await start_upstream(Recorder().app())
    slow = await start_upstream(stalling_app())
    proxy = await start_proxy(
        UpstreamSettings(name="ok", url=upstream_url(ok), models=["ok"], api_key_env="KEY_A"),
        UpstreamSettings(name="slow", url=upstream_url(slow), models=["slow"], api_key_env="KEY_A"),
        UpstreamSettings(
            name="down", url="http://127.0.0.1:9", models=["down"], api_key_env="KEY_A"
        ),
        timeouts={"first_byte": 0.3},
    )
    bodies = []
    for model, status in [("ok", 200), ("slow", 504), ("down", 502)]:
        resp = await proxy.post("/v1/chat/completions", json={"model": model})
        assert resp.status == status
        bodies.append(await resp.text())
    assert secret not in "".join(bodies)
    assert secret not in caplog.text
    assert caplog.records  # the failures were logged, without the key


# -- request limits ------------------------------------------------------------------------


async def test_a_request_body_over_the_limit_is_413_without_reaching_the_upstream(
    proxy_to_recorder: ProxyToRecorder,
) -> None:
    upstream, proxy = await proxy_to_recorder(limits={"max_request_body_bytes": 4096})
    big = b'{"model": "m", "pad": "' + b"x" * 5000 + b'"}'
    resp = await proxy.post(
        "/v1/chat/completions", data=big, headers={"Content-Type": "application/json"}
    )
    assert resp.status == 413
    assert (await resp.json())["error"]["code"] == 413

    async def chunked_body():
        for _ in range(10):
            yield b"x" * 1000

    resp = await proxy.post(
        "/v1/chat/completions", data=chunked_body(), headers={"Content-Type": "application/json"}
    )
    assert resp.status == 413
    resp = await proxy.post("/v1/chat/completions", data=big[:4000] + b'"}')
    assert resp.status == 200
    assert len(upstream.seen) == 1


@pytest.mark.parametrize(
    ("head", "limit", "status"),
    [
        (b"GET /v1/props HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000, 2048, 400),
        (b"GET /v1/props HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 3000, 4096, 200),
        (b"GET /v1/" + b"a" * 3000 + b" HTTP/1.1\r\nHost: x", 2048, 400),
        (b"GET /v1/" + b"a" * 3000 + b" HTTP/1.1\r\nHost: x", 4096, 200),
    ],
    ids=["header-over", "header-under", "line-over", "line-under"],
)
async def test_request_line_and_headers_are_capped_by_max_header_bytes(
    head: bytes, limit: int, status: int, proxy_to_recorder: ProxyToRecorder
) -> None:
    upstream, proxy = await proxy_to_recorder(limits={"max_header_bytes": limit})
    assert (await raw_request(port_of(proxy), head))[0] == status
    assert len(upstream.seen) == (status == 200)


async def test_requests_over_an_upstreams_concurrency_limit_are_429_until_a_slot_frees(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    release = asyncio.Event()
    started = 0

    async def slow(request: web.Request) -> web.StreamResponse:
        nonlocal started
        started += 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(b'data: {"n": 1}\n\n')
        await release.wait()
        await response.write(b"data: [DONE]\n\n")
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", slow)
    server = await start_upstream(app)
    other = Recorder()
    proxy = await start_proxy(
        UpstreamSettings(
            name="small", url=upstream_url(server), models=["small"], max_concurrent_requests=2
        ),
        UpstreamSettings(
            name="other", url=upstream_url(await start_upstream(other.app())), models=["*"]
        ),
    )
    request = {"model": "small", "stream": True}
    first = await proxy.post("/v1/chat/completions", json=request)
    second = await proxy.post("/v1/chat/completions", json=request)
    assert (first.status, second.status) == (200, 200)

    refused = await proxy.post("/v1/chat/completions", json=request)
    assert refused.status == 429
    assert refused.headers["Retry-After"] == "1"
    assert (await refused.json())["error"]["type"] == "rate_limit_error"
    assert started == 2
    # Other upstreams are not affected.
    assert (await proxy.post("/v1/chat/completions", json={"model": "x"})).status == 200

    second.close()  # a client that leaves frees its slot too
    third = None
    for _ in range(100):
        third = await proxy.post("/v1/chat/completions", json=request)
        if third.status == 200:
            break
        await asyncio.sleep(0.02)
    assert third is not None
    assert third.status == 200
    release.set()
    assert await first.read() == b'data: {"n": 1}\n\ndata: [DONE]\n\n'
    assert await third.read() == b'data: {"n": 1}\n\ndata: [DONE]\n\n'
    after = await proxy.post("/v1/chat/completions", json=request)
    assert after.status == 200
    await after.read()


# -- hop-by-hop and forwarding headers -----------------------------------------------------

HOP_REQUEST_HEADERS = (
    b"Connection: keep-alive, X-Named-Hop\r\nX-Named-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
    b"TE: trailers\r\nTrailer: X-Checksum\r\nUpgrade: websocket\r\n"
    b"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n"
    b"Proxy: http://127.0.0.1:1/\r\nProxy-Custom: 1\r\nX-Kept: yes"
)
HOP_NAMES = (
    "Connection",
    "X-Named-Hop",
    "Keep-Alive",
    "TE",
    "Trailer",
    "Upgrade",
    "Proxy-Authorization",
    "Proxy-Connection",
    "Proxy",
    "Proxy-Custom",
    "Proxy-Authenticate",
)


async def test_hop_by_hop_request_headers_never_reach_the_upstream(
    proxy_to_recorder: ProxyToRecorder,
) -> None:
    upstream, proxy = await proxy_to_recorder()
    body = b'{"model": "m"}'
    status, _, _ = await raw_request(
        port_of(proxy),
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n" + HOP_REQUEST_HEADERS,
        b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body),
    )
    assert status == 200
    headers = upstream.headers
    assert headers["X-Kept"] == "yes"
    for name in (*HOP_NAMES, "Transfer-Encoding"):
        assert name not in headers, name


async def test_hop_by_hop_response_headers_never_reach_the_client(
    start_proxy: StartProxy,
) -> None:
    body = b'{"ok": true}'

    async def script(conn: Conn) -> None:
        await conn.send(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
            b"Connection: close, X-Named-Hop\r\nX-Named-Hop: 1\r\nKeep-Alive: timeout=5\r\n"
            b"Trailer: X-Checksum\r\nUpgrade: h2c\r\nProxy-Authenticate: Basic\r\n"
            b"Proxy-Connection: close\r\nProxy-Custom: 1\r\nTE: trailers\r\nX-Kept: yes\r\n\r\n%s"
            % (len(body), body)
        )
        conn.close()

    async with raw_upstream(script) as upstream:
        proxy = await start_proxy(UpstreamSettings(name="u", url=upstream.url))
        status, raw_headers, content = await raw_request(
            port_of(proxy), b"GET /props HTTP/1.1\r\nHost: x"
        )
    headers = header_lines(raw_headers)
    assert (status, content) == (200, body)
    assert headers["X-Kept"] == "yes"
    assert headers.getall("Connection") == ["close"]  # the proxy's own, for this request
    for name in HOP_NAMES:
        if name != "Connection":
            assert name not in headers, name


CLIENT_FORWARDING = {
    "X-Forwarded-For": "203.0.113.7",
    "X-Forwarded-Proto": "https",
    "X-Forwarded-Host": "evil.example",
    "Forwarded": "for=203.0.113.7",
    "X-Real-IP": "203.0.113.7",
}


@pytest.mark.parametrize(
    ("forwarded", "expected"),
    [
        ({}, {"X-Forwarded-For": "127.0.0.1", "X-Forwarded-Proto": "http"}),
        (
            {"trust_incoming": True},
            {
                **CLIENT_FORWARDING,
                "X-Forwarded-For": "203.0.113.7, 127.0.0.1",
                "X-Forwarded-Proto": "https",
            },
        ),
        ({"add": False}, {}),
        ({"add": False, "trust_incoming": True}, CLIENT_FORWARDING),
    ],
    ids=["default", "trusted", "off", "off-trusted"],
)
async def test_forwarding_headers_follow_the_settings(
    forwarded: dict[str, bool], expected: dict[str, str], proxy_to_recorder: ProxyToRecorder
) -> None:
    upstream, proxy = await proxy_to_recorder(forwarded=forwarded)
    resp = await proxy.get("/props", headers=CLIENT_FORWARDING)
    assert resp.status == 200
    seen = {name: upstream.headers[name] for name in CLIENT_FORWARDING if name in upstream.headers}
    assert seen == expected
