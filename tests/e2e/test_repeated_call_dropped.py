"""Issue 16's ``dedupe_calls`` through the running proxy: a real aiohttp upstream sends the
same call twice in a row (Gemma 4 on llama.cpp, llama.cpp#21882), event by event."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support import strict_checker
from tests.support.upstreams import replay_app

GOLDEN = Path(__file__).parents[1] / "golden"
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text())
TWICE = (GOLDEN / "gap-same-call-twice.in.sse").read_bytes()


@pytest.mark.parametrize("dedupe", [False, True])
async def test_dedupe_calls_drops_the_second_of_two_equal_calls_through_the_proxy(
    dedupe: bool, start_upstream: StartUpstream, start_proxy: StartProxy
) -> None:
    upstream = await start_upstream(replay_app(TWICE))
    proxy = await start_proxy(
        UpstreamSettings(name="u", url=upstream_url(upstream), dedupe_calls=dedupe)
    )
    resp = await proxy.post("/v1/chat/completions", json=REQUESTS["weather"])
    assert resp.status == 200
    output = await resp.read()
    assert strict_checker.check(output) == []
    seen = strict_checker.reconstruct(output).choices[0]
    assert [c.id for c in seen.calls] == (["call_g1"] if dedupe else ["call_g1", "call_g2"])
    if not dedupe:
        assert output == TWICE  # counted only: byte for byte
