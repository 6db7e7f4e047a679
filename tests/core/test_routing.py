"""Routing by model glob, the default route, the 404, credentials, and the /v1/models union."""

from __future__ import annotations

import pytest
from aiohttp import web

from proxy.core.errors import NoRouteError
from proxy.core.routing import Router, Upstream, is_safe_path
from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url

LLAMA = Upstream("llama", "http://a", ("llama-*", "qwen*"))
VLLM = Upstream("vllm", "http://b", ("*-instruct",))


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("llama-3", "llama"),
        ("qwen2.5", "llama"),
        ("mistral-instruct", "vllm"),
        ("llama-instruct", "llama"),
    ],
)
def test_router_first_matching_upstream_wins(model: str, expected: str) -> None:
    assert Router([LLAMA, VLLM]).route(model).name == expected


def test_router_globs_are_case_sensitive_and_whole_name() -> None:
    with pytest.raises(NoRouteError, match="'LLAMA-3'"):
        Router([LLAMA, VLLM]).route("LLAMA-3")
    with pytest.raises(NoRouteError):
        Router([VLLM]).route("mistral-instruct-v2")


def test_router_default_catches_unmatched_and_modelless() -> None:
    router = Router([LLAMA, VLLM], default="vllm")
    assert router.route("gpt-4").name == "vllm"
    assert router.route(None).name == "vllm"


def test_router_modelless_goes_to_a_single_upstream_but_unmatched_model_is_404() -> None:
    router = Router([LLAMA])
    assert router.route(None).name == "llama"
    with pytest.raises(NoRouteError, match="gpt-4"):
        router.route("gpt-4")


def test_router_modelless_without_default_among_several_is_404() -> None:
    with pytest.raises(NoRouteError, match="no default_upstream"):
        Router([LLAMA, VLLM]).route(None)


@pytest.mark.parametrize(
    ("path", "safe"),
    [
        ("/v1/chat/completions", True),
        ("/v1/models?x=../y", True),
        ("/v1/../admin", False),
        ("/v1/./x", False),
        ("/v1/%2e%2e/admin", False),
        ("/v1/%252e%252e/admin", False),
        ("/v1/..%2fadmin", False),
        ("/v1\\..\\admin", False),
        ("http://evil.example/v1", False),
        ("/v1/a..b", True),
        ("/v1/..;/admin", False),
        ("/v1/..;jsessionid=1/admin", False),
        ("/v1/a;..", True),
    ],
)
def test_paths_that_could_climb_out_of_a_prefix_are_refused(path: str, safe: bool) -> None:
    assert is_safe_path(path) is safe


def named_app(
    name: str, *, models: list[str] | None = None, fail_models: bool = False
) -> web.Application:
    async def chat(request: web.Request) -> web.Response:
        body = await request.json()
        return web.json_response(
            {
                "served_by": name,
                "model": body.get("model"),
                "auth": request.headers.get("Authorization"),
            }
        )

    async def list_models(request: web.Request) -> web.Response:
        if fail_models:
            return web.Response(status=500)
        return web.json_response(
            {"object": "list", "data": [{"id": m, "object": "model"} for m in models or []]}
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", list_models)
    return app


async def test_two_live_upstreams_by_glob_with_default_and_404(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    a = await start_upstream(named_app("a"))
    b = await start_upstream(named_app("b"))
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(a), models=["llama-*"]),
        UpstreamSettings(name="b", url=upstream_url(b), models=["qwen-*"]),
    )
    for model, served_by in [("llama-3", "a"), ("qwen-7b", "b")]:
        resp = await proxy.post("/v1/chat/completions", json={"model": model})
        assert (await resp.json())["served_by"] == served_by
    resp = await proxy.post("/v1/chat/completions", json={"model": "gpt-4"})
    assert resp.status == 404
    error = (await resp.json())["error"]
    assert "gpt-4" in error["message"]
    assert error["code"] == 404


async def test_default_upstream_catches_the_rest(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    a = await start_upstream(named_app("a"))
    b = await start_upstream(named_app("b"))
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(a), models=["llama-*"]),
        UpstreamSettings(name="b", url=upstream_url(b), models=["qwen-*"]),
        default_upstream="b",
    )
    resp = await proxy.post("/v1/chat/completions", json={"model": "gpt-4"})
    assert (await resp.json())["served_by"] == "b"


async def test_credentials_are_injected_from_the_environment_replacing_the_clients(
    start_upstream: StartUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_UPSTREAM_KEY", "sk-upstream")
    a = await start_upstream(named_app("a"))
    b = await start_upstream(named_app("b"))
    proxy = await start_proxy(
        UpstreamSettings(
            name="a", url=upstream_url(a), models=["with-key"], api_key_env="TEST_UPSTREAM_KEY"
        ),
        UpstreamSettings(name="b", url=upstream_url(b), models=["*"]),
    )
    headers = {"Authorization": "Bearer sk-client"}
    resp = await proxy.post("/v1/chat/completions", json={"model": "with-key"}, headers=headers)
    assert (await resp.json())["auth"] == "Bearer sk-upstream"
    resp = await proxy.post("/v1/chat/completions", json={"model": "other"}, headers=headers)
    assert (await resp.json())["auth"] == "Bearer sk-client"


async def test_models_is_the_union_of_upstreams_skipping_a_failing_one(
    start_upstream: StartUpstream, start_proxy: StartProxy, caplog: pytest.LogCaptureFixture
) -> None:
    a = await start_upstream(named_app("a", models=["llama-3", "shared"]))
    b = await start_upstream(named_app("b", models=["qwen-7b", "shared"]))
    broken = await start_upstream(named_app("c", fail_models=True))
    proxy = await start_proxy(
        UpstreamSettings(name="a", url=upstream_url(a)),
        UpstreamSettings(name="b", url=upstream_url(b)),
        UpstreamSettings(name="broken", url=upstream_url(broken)),
        UpstreamSettings(name="down", url="http://127.0.0.1:9"),
    )
    resp = await proxy.get("/v1/models")
    assert resp.status == 200
    body = await resp.json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["llama-3", "shared", "qwen-7b"]
    assert "skipping upstream broken" in caplog.text
    assert "skipping upstream down" in caplog.text


async def test_models_when_no_upstream_answers_is_502(start_proxy: StartProxy) -> None:
    proxy = await start_proxy(UpstreamSettings(name="down", url="http://127.0.0.1:9"))
    resp = await proxy.get("/v1/models")
    assert resp.status == 502


async def test_dot_segments_are_refused_before_reaching_an_upstream(
    start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    from yarl import URL

    proxy = await start_proxy(await start_upstream(named_app("a")))
    url = URL(f"http://127.0.0.1:{proxy.port}/v1/%2e%2e/admin", encoded=True)
    resp = await proxy.session.get(url)
    assert resp.status == 400
