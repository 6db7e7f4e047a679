"""Driving the native repairer over bytes cut in different ways."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from typing import Any

from proxy.core.markup import check_names
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages.native.stream import NativeMessages
from tests.support.normalizer import bytewise, random_cuts

TOOLS_REQUEST: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 1024,
    "messages": [{"role": "user", "content": "go"}],
    "tools": [
        {
            "name": "get_weather",
            "input_schema": {"type": "object", "properties": {"location": {"type": "string"}}},
        },
        {"name": "make_directory", "input_schema": {"type": "object"}},
        # the tool NO_ARGS's recording calls, so that its call fits (issue 25's check)
        {"name": "updateIssueList", "input_schema": {"type": "object"}},
    ],
}

EVERY_DIALECT = check_names(["auto"])


def repair(
    pieces: Sequence[bytes] | bytes,
    request: object = TOOLS_REQUEST,
    *,
    complete: bool = True,
    dedupe: bool = False,
    **options: Any,
) -> tuple[bytes, Counter[str]]:
    if isinstance(pieces, bytes):
        pieces = [pieces]
    counter = itertools.count(1)
    settings = UpstreamOptions(**{"dialects": EVERY_DIALECT, "dedupe_calls": dedupe, **options})
    stream = NativeMessages(lambda: f"id{next(counter):05d}", request, options=settings)
    out = [data for piece in pieces for data in stream.feed(piece)]
    out += stream.close(complete=complete)
    return b"".join(out), stream.repairs


def every_cut(data: bytes, seed: str) -> list[list[bytes]]:
    return [[data], bytewise(data), *random_cuts(data, seed)]
