"""Issue 24 item 7 on native Responses: llama-server b11434 ends a failed generation with a
bare ``data: {"error": {...}}`` (no ``event:`` line, no ``type``, no terminal event). The
client gets an ``error`` event and ``response.failed`` carrying the message, the items left
open ended before them (``error-reshaped``); never a successful end."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.responses.checker import check
from tests.support.normalizer import bytewise, random_cuts

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
B11434 = (FIELD / "llamacpp-b11434-error.responses.sse").read_bytes()
MESSAGE = "The model produced output that does not match the expected peg-native format"
REQUEST = {"model": "m", "input": "hi"}


def run(pieces: Sequence[bytes], *, complete: bool = True) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(REQUEST),
        options=UpstreamOptions(dialects=("auto",)),
    )
    out = [b for piece in pieces for b in stream.feed(piece)]
    return b"".join([*out, *stream.close(complete=complete)]), stream.repairs


def every_cut(body: bytes) -> tuple[bytes, Counter[str]]:
    whole, repairs = run([body])
    for pieces in [bytewise(body), *random_cuts(body, seed="b11434")]:
        assert run(pieces)[0] == whole
    return whole, repairs


def types(checked: Any) -> list[str]:
    return [e["type"] for e in checked.events]


def test_llama_servers_bare_error_becomes_an_error_event_and_response_failed() -> None:
    out, repairs = every_cut(B11434)
    checked = check(out)  # the strict checker: one terminal, last, items closed before it
    assert types(checked)[-2:] == ["error", "response.failed"]
    error = checked.events[-2]
    assert error["message"] == MESSAGE
    assert error["code"] == "server_error"
    assert checked.response is not None
    assert checked.response["status"] == "failed"
    assert checked.response["error"] == {"code": "server_error", "message": MESSAGE}
    [message] = checked.items
    assert message["status"] == "incomplete"  # the failure cut it
    assert checked.text == "Hello! I"
    assert repairs[Repair.ERROR_RESHAPED] == 1


def test_an_error_before_anything_still_opens_the_response_then_fails_it() -> None:
    line = b'data: {"error":{"code":500,"message":"boom","type":"server_error"}}\n\n'
    out, repairs = every_cut(line)
    checked = check(out)
    assert types(checked) == [
        "response.created",
        "response.in_progress",
        "error",
        "response.failed",
    ]
    assert checked.response is not None
    assert checked.response["error"]["message"] == "boom"
    assert repairs[Repair.ERROR_RESHAPED] == 1


def test_nothing_after_the_failure_and_no_success_made_up() -> None:
    later = (
        b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
        b'"item_id":"msg_b11434err","delta":"more"}\n\n'
    )
    out, repairs = run([B11434 + later])
    checked = check(out)
    assert types(checked)[-1] == "response.failed"
    assert b"response.completed" not in out
    assert repairs[Repair.EVENT_AFTER_TERMINAL] == 1
