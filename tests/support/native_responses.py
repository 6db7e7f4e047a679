"""Native Responses streams repaired for a request with two weather tools, as the native
Responses tests drive them, and what a checked stream says (its calls and its text)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from tests.support.normalizer import bytewise, random_cuts

if TYPE_CHECKING:
    from tests.core.protocols.responses.checker import Checked

WEATHER_TOOLS = {
    "model": "m",
    "tools": [
        {
            "type": "function",
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
        {
            "type": "function",
            "name": "get_time",
            "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
        },
    ],
}
NATIVE = UpstreamOptions(dialects=("auto",))  # every markup dialect


def summary(checked: Checked) -> tuple[list[tuple[str, str, Any, str]], str]:
    calls = [
        (
            c["name"],
            c["call_id"],
            json.loads(c["arguments"]) if c["status"] == "completed" else c["arguments"],
            c["status"],
        )
        for c in checked.calls
    ]
    return calls, checked.text


def _run(
    pieces: Sequence[bytes], *, dedupe: bool, complete: bool = True
) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    native = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(WEATHER_TOOLS),
        options=replace(NATIVE, dedupe_calls=dedupe),
    )
    out = [b for piece in pieces for b in native.feed(piece)]
    out += native.close(complete=complete)
    return b"".join(out), native.repairs


def every_cutting(body: bytes, *, dedupe: bool) -> tuple[bytes, Counter[str]]:
    """The output and repairs for ``WEATHER_TOOLS``, the same whole, a byte at a time and at
    random cuts."""
    whole, repairs = _run([body], dedupe=dedupe)
    for pieces in [bytewise(body), *random_cuts(body, seed=body[:64].hex())]:
        assert _run(pieces, dedupe=dedupe) == (whole, repairs)
    return whole, repairs
