"""Every event stream the proxy relays goes out unbuffered by a reverse proxy in front of it
(``X-Accel-Buffering: no``), whatever the plan: repaired, translated, or passed through as it
came (issue 27: one head for the answers of every plan in shell/respond.py; a native mode
event stream passed through unrewritten, a 4xx one, had none before)."""

from __future__ import annotations

import pytest
from aiohttp import web

from proxy.settings import UpstreamSettings
from tests.conftest import StartProxy, StartUpstream, upstream_url

EVENTS = b'event: error\ndata: {"type": "error"}\n\n'


async def _stream(request: web.Request) -> web.StreamResponse:
    status = 429 if request.path.startswith("/v1/busy") else 200
    response = web.StreamResponse(status=status, headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    await response.write(EVENTS)
    await response.write_eof()
    return response


@pytest.mark.parametrize(
    ("path", "model"),
    [
        ("/v1/chat/completions", "chat"),  # repaired as chat
        ("/v1/busy/chat/completions", "chat"),  # a 429 event stream, passed through
        ("/v1/messages", "native"),  # repaired in place, native mode
        ("/v1/busy/messages", "native"),  # a 429 event stream of native mode, passed through
        ("/v1/messages", "chat"),  # translated
    ],
)
async def test_every_relayed_event_stream_goes_out_unbuffered(
    start_upstream: StartUpstream, start_proxy: StartProxy, path: str, model: str
) -> None:
    app = web.Application()
    app.router.add_post("/{tail:.*}", _stream)
    upstream = await start_upstream(app)
    proxy = await start_proxy(
        UpstreamSettings(name="chat", url=upstream_url(upstream), models=["chat"]),
        UpstreamSettings(
            name="native", url=upstream_url(upstream), models=["native"], messages="native"
        ),
    )
    body = {"model": model, "stream": True, "max_tokens": 8, "messages": []}
    resp = await proxy.post(path, json=body)
    await resp.read()
    assert resp.headers.get("Content-Type", "").startswith("text/event-stream")
    assert resp.headers["X-Accel-Buffering"] == "no"
