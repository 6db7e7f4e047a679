"""Native Responses streams for issue 25's heal and coercion tests: canonical streams built by
the translate encoder from neutral events (tests/core/protocols/responses/variants.py), the
repairer run on them whole or in pieces, and what a client reads of the output."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    TextDelta,
    Usage,
)
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import parse
from tests.support.normalizer import bytewise, random_cuts
from tests.support.streams import chunks

FIXES = UpstreamOptions(heal_arguments=True, coerce_arguments=True)
OFF = UpstreamOptions()
DELTA = "response.function_call_arguments.delta"


def call(index: int, name: str, *fragments: str) -> list[Any]:
    """A call's neutral events: its opening, its argument fragments, its close."""
    return [
        CallOpened(index, f"call_{index}", name),
        *(ArgumentsDelta(index, f) for f in fragments),
        CallClosed(index),
    ]


def stream(*parts: Any, finish: FinishReason = FinishReason.TOOL_CALLS) -> bytes:
    """A canonical native Responses stream of ``parts`` (neutral events, or a string: text;
    ``("reasoning", text)``: reasoning), ended by ``finish``."""
    events: list[Any] = [Started(id="chatcmpl-x", model="m", created=1)]
    for part in parts:
        if isinstance(part, str):
            events.append(TextDelta(part))
        elif isinstance(part, tuple):
            events.append(ReasoningDelta(part[1]))
        else:
            events += part
    events += [Finished(finish), Usage(3, 4), Ended(complete=True)]
    return v.sse(v.encoded(events))


def payloads(body: bytes) -> list[dict[str, Any]]:
    """A stream's events, to be broken by a shape of tests/core/protocols/responses/variants.py."""
    return [p for _, p in parse(body)]


def items_completed(body: bytes) -> bytes:
    """``body`` as a server sends it that marks only the response cut, its items
    ``completed`` (the terminal event alone says a token limit ended it)."""
    events = payloads(body)
    for payload in events:
        items = [payload.get("item")]
        if isinstance(payload.get("response"), dict):
            items += payload["response"].get("output") or []
        for item in items:
            if isinstance(item, dict) and item.get("status") == "incomplete":
                item["status"] = "completed"
    return v.sse(events)


def run(
    pieces: Sequence[bytes],
    request: dict[str, Any],
    options: UpstreamOptions,
    *,
    complete: bool = True,
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    native = NativeStream(
        lambda: f"id{next(counter):05d}", NativeRequest.from_body(request), options=options
    )
    out = [b for piece in pieces for b in native.feed(piece)]
    out += native.close(complete=complete)
    return b"".join(out), native.repairs


def every_cut(
    body: bytes, request: dict[str, Any], options: UpstreamOptions, *, complete: bool = True
) -> tuple[bytes, Counter[str]]:
    """The output whole, held the same a byte at a time and at random cuts."""
    whole = run([body], request, options, complete=complete)
    for pieces in [bytewise(body), *random_cuts(body, seed=body[:64].hex())]:
        assert run(pieces, request, options, complete=complete) == whole
    return whole


def call_events(out: bytes) -> dict[str, list[dict[str, Any]]]:
    """Each call item's events, by item id."""
    found: dict[str, list[dict[str, Any]]] = {}
    for event in chunks(out):
        item = event.get("item")
        ident = item.get("id") if isinstance(item, dict) else event.get("item_id")
        if isinstance(item, dict) and item.get("type") != "function_call":
            continue
        if ident is not None and event["type"].startswith(
            ("response.output_item.", "response.function_call_arguments.")
        ):
            found.setdefault(ident, []).append(event)
    return found


def terminal(out: bytes) -> dict[str, Any]:
    [end] = [e for e in chunks(out) if e["type"] in ("response.completed", "response.incomplete")]
    return end


def sent_arguments(out: bytes) -> list[str]:
    """Each call's arguments as its deltas send them."""
    return [
        "".join(e["delta"] for e in evs if e["type"] == DELTA) for evs in call_events(out).values()
    ]
