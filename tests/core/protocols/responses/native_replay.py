"""A replay upstream that speaks the Responses API itself, with a server's quirks (native mode).

``POST /v1/responses`` answers from the request alone, as chat_replay.ChatReplay does: a
``function_call_output`` in the input -> a final text quoting it; the tool in ``arguments``
offered -> one call to it; otherwise a short text. The canonical stream is made by the translate
encoder from neutral events, then broken by one of ``QUIRKS`` (variants.py), the way the
server named there sends it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from tests.core.protocols.responses import variants as v


def _call(name: str, arguments: dict[str, Any], call_id: str) -> list[StreamEvent]:
    text = json.dumps(arguments)
    pieces = [text[i : i + 8] for i in range(0, len(text), 8)]
    return [CallOpened(0, call_id, name), *(ArgumentsDelta(0, p) for p in pieces), CallClosed(0)]


def _markup(name: str, arguments: dict[str, Any], call_id: str) -> list[StreamEvent]:
    """vLLM with a non-harmony model (R4): the call as hermes markup in the text."""
    text = f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"
    return [TextDelta(text[i : i + 8]) for i in range(0, len(text), 8)]


QUIRKS: dict[str, tuple[Callable[..., list[StreamEvent]], Callable[[v.Payloads], v.Payloads]]] = {
    "llamacpp": (_call, v.llamacpp),
    "args-only-in-done": (_call, v.args_only_in_done),
    "no-item-done-for-calls": (_call, v.no_item_done_for_calls),
    "markup-in-text": (_markup, lambda payloads: payloads),
}


class ResponsesReplay:
    def __init__(
        self, quirk: str, arguments: dict[str, dict[str, Any]], call_id: str = "call_native1"
    ) -> None:
        self.make_call, self.variant = QUIRKS[quirk]
        self.arguments = arguments
        self.call_id = call_id
        self.requests: list[dict[str, Any]] = []
        self.app = web.Application()
        self.app.router.add_post("/v1/responses", self._responses)

    async def _responses(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        items = body.get("input") if isinstance(body.get("input"), list) else []
        outputs = [
            i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"
        ]
        names = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
        target = next((n for n in names if n in self.arguments), None)
        events: list[StreamEvent] = [Started(model="native-model", created=1800000000)]
        if outputs:
            events += [
                TextDelta(f"The tool said: {outputs[-1]['output']}"),
                Finished(FinishReason.STOP),
            ]
        elif target is not None:
            events += [
                *self.make_call(target, self.arguments[target], self.call_id),
                Finished(FinishReason.TOOL_CALLS),
            ]
        else:
            events += [TextDelta("Hello there."), Finished(FinishReason.STOP)]
        payloads = v.encoded([*events, Usage(11, 7), Ended(complete=True)])
        broken = self.variant(payloads) if target is not None and not outputs else payloads
        return web.Response(body=v.sse(broken), content_type="text/event-stream")
