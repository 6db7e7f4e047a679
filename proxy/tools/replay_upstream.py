"""A stand-in model server: it answers ``POST .../chat/completions`` by replaying a recorded
response body, one SSE event per write, as a server generating tokens sends it.

The request's ``model`` names the recording (its file name without ``.sse``); the recordings
are the files of one folder. ``toolcall-proxy demo`` serves the package's own (proxy/demo/).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Final

import orjson
from aiohttp import web

_EVENT_END: Final = re.compile(rb"(?<=\n\n)")


def split_events(body: bytes) -> list[bytes]:
    """The body cut after each blank line: one SSE event per piece, as it was sent."""
    return [piece for piece in _EVENT_END.split(body) if piece]


def replay_app(folder: Path, *, gap: float = 0.0) -> web.Application:
    """An app replaying ``folder/<model>.sse``, with ``gap`` seconds between events."""
    recordings = {path.stem: path.read_bytes() for path in sorted(folder.glob("*.sse"))}

    async def chat_completions(request: web.Request) -> web.StreamResponse:
        try:
            payload = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            payload = None
        model = payload.get("model") if isinstance(payload, dict) else None
        body = recordings.get(model) if isinstance(model, str) else None
        if body is None:
            message = f"no recording named {model!r}; known: {', '.join(recordings)}"
            return web.json_response({"error": {"message": message}}, status=404)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for event in split_events(body):
            await response.write(event)
            if gap:
                await asyncio.sleep(gap)
        await response.write_eof()
        return response

    async def models(request: web.Request) -> web.Response:
        data = [{"id": name, "object": "model"} for name in recordings]
        return web.json_response({"object": "list", "data": data})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat_completions)
    app.router.add_get("/v1/models", models)
    return app
