"""Which key each upstream gets where issue 26 found the client's going beside its own (items 13
and 17): ``GET /v1/models``, asked of every upstream, and native Messages' ``count_tokens``.

Real loopback upstreams (tests/support/upstreams.py) record the headers that reached them.
"""

from __future__ import annotations

from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.upstreams import AnyUpstream

CLIENT = {"Authorization": "Bearer sk-client", "x-api-key": "sk-client-anthropic"}


def keys(upstream: AnyUpstream) -> list[tuple[str | None, str | None]]:
    """(Authorization, x-api-key) of each request the upstream got."""
    found = []
    for _, headers, _ in upstream.requests:
        lower = {k.lower(): v for k, v in headers.items()}
        found.append((lower.get("authorization"), lower.get("x-api-key")))
    return found


async def test_models_sends_each_upstream_only_what_a_request_routed_to_it_would_carry(
    start_upstream: StartUpstream, start_proxy: StartProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEY_A", "sk-own-a")
    monkeypatch.setenv("KEY_B", "sk-own-b")
    configs: dict[str, dict[str, Any]] = {
        "keyed": {"api_key_env": "KEY_A"},
        "keyed-native": {"api_key_env": "KEY_B", "messages": "native"},
        "keyless-translate": {},
        "keyless-native": {"messages": "native"},
        "keyless-passthrough": {"normalize": False},
    }
    upstreams = {name: AnyUpstream() for name in configs}
    settings = [
        UpstreamSettings(
            name=name,
            url=upstream_url(await start_upstream(upstreams[name].app)),
            models=[name],
            **config,
        )
        for name, config in configs.items()
    ]
    proxy = await start_proxy(*settings)
    resp = await proxy.get("/v1/models", headers=CLIENT)
    assert resp.status == 200
    assert {name: keys(upstream) for name, upstream in upstreams.items()} == {
        # a keyed upstream: its own key, never the client's in either header
        "keyed": [("Bearer sk-own-a", None)],
        "keyed-native": [("Bearer sk-own-b", None)],
        # keyless: the client's Authorization as a chat request carries it; its x-api-key
        # only where a Messages request would carry it
        "keyless-translate": [("Bearer sk-client", None)],
        "keyless-native": [("Bearer sk-client", "sk-client-anthropic")],
        "keyless-passthrough": [("Bearer sk-client", "sk-client-anthropic")],
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/v1/messages/count_tokens", (None, "sk-own")),
        ("/v1/messages", (None, "sk-own")),
        ("/v1/chat/completions", ("Bearer sk-own", None)),
        ("/v1/embeddings", ("Bearer sk-own", None)),
    ],
)
async def test_a_keyed_upstream_gets_its_key_in_its_protocols_header_and_nothing_of_the_clients(
    path: str,
    expected: tuple[str | None, str | None],
    start_upstream: StartUpstream,
    start_proxy: StartProxy,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KEY", "sk-own")
    upstream = AnyUpstream()
    proxy = await start_proxy(
        UpstreamSettings(
            name="u",
            url=upstream_url(await start_upstream(upstream.app)),
            api_key_env="KEY",
            messages="native",
        )
    )
    body = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}
    resp = await proxy.post(path, json=body, headers=CLIENT)
    assert resp.status == 200
    assert keys(upstream) == [expected]
