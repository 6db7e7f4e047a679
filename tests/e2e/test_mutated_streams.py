"""Mutated real streams through the running proxy (hypothesis).

tests/core/protocols/chat/test_properties.py proves the core's promise on mutated streams: nothing
escapes, no argument byte is lost. This module proves the shell keeps it: an upstream replays
each mutated stream in random writes (and may drop the connection at the end); what the client
receives over HTTP is the core's output for those bytes, byte for byte (call ids aside, drawn
at random), and it holds every argument character and all the text of the input, except what
the normalizer dropped on purpose. A crash anywhere on the path would show as a 500, a hang or
a cut stream.

The default run is the suite's hypothesis profile (200 examples);
``HYPOTHESIS_PROFILE=deep`` runs 5000.
"""

from __future__ import annotations

import asyncio
import base64
import re
from collections import Counter
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proxy.core.protocols.chat.normalize import RequestInfo
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import upstream_options
from tests.conftest import StartProxy, StartUpstream, upstream_url
from tests.support.mutations import argument_and_text_chars, mutated
from tests.support.normalizer import cut, run
from tests.support.streams import read_until_error

CHAT = "/v1/chat/completions"
LIMITS = {"max_held_bytes": 4096}  # small enough that some mutated streams reach the cap


async def replay(request: web.Request) -> web.StreamResponse:
    spec = await request.json()
    body = base64.b64decode(spec["replay"])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for piece in cut(body, spec["cuts"]):
        await response.write(piece)
    if spec["drop"]:
        assert request.transport is not None
        request.transport.close()
        return response
    await response.write_eof()
    return response


@pytest.fixture
async def proxy(start_upstream: StartUpstream, start_proxy: StartProxy) -> Any:
    app = web.Application(client_max_size=1 << 24)
    app.router.add_post(CHAT, replay)
    url = upstream_url(await start_upstream(app))
    return await start_proxy(
        UpstreamSettings(name="s1", url=url, models=["s1"]),
        UpstreamSettings(name="s2", url=url, models=["s2"], output="coalesced"),
        limits=LIMITS,
    )


def reference(body: bytes, model: str, *, complete: bool) -> tuple[bytes, list[str]]:
    """What the core makes of ``body`` with the proxy's options for ``model``."""
    settings = Settings(
        upstreams=[UpstreamSettings(name=model, url="http://x", output=OUTPUTS[model])],
        limits=LIMITS,
    )
    options = upstream_options(settings.upstreams[0], settings)
    out, normalizer = run(body, options=options, request=RequestInfo(), complete=complete)
    return out, normalizer.dropped_arguments


OUTPUTS = {"s1": "streamed", "s2": "coalesced"}


@settings(
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    body=mutated(),
    model=st.sampled_from(sorted(OUTPUTS)),
    drop=st.booleans(),
    cuts=st.lists(st.integers(0, 1 << 20), max_size=8),
)
async def test_mutated_streams_through_the_proxy_lose_no_argument_byte(
    proxy: TestClient[web.Request, web.Application],
    body: bytes,
    model: str,
    drop: bool,
    cuts: list[int],
) -> None:
    spec = {
        "model": model,
        "stream": True,
        "replay": base64.b64encode(body).decode(),
        "cuts": cuts,
        "drop": drop,
    }
    resp = await proxy.post(CHAT, json=spec)
    assert resp.status == 200
    received, error = await asyncio.wait_for(read_until_error(resp), timeout=30)
    assert (error is not None) == drop

    expected, dropped = reference(body, model, complete=not drop)
    assert without_ids(received) == without_ids(expected)
    args_out, text_out = argument_and_text_chars(received)
    args_in, text_in = argument_and_text_chars(body)
    assert not (args_in - args_out) - Counter("".join(dropped))
    assert text_out == text_in


def without_ids(stream: bytes) -> bytes:
    """The stream with every id blanked: the proxy draws new call ids at random."""
    return re.sub(rb'"id"\s*:\s*"[^"]*"', b'"id":""', stream)
