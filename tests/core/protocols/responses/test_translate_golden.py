"""Translate mode over every single-choice chat golden stream: the chat repairs still apply (old
llama.cpp, markup in content, object arguments, ...) and the Responses client gets a canonical
stream (the strict checker) carrying what a chat client reconstructs (the case's ``expect``),
the same bytes whole, a byte at a time and at random cuts."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from proxy.core.bridge import ChatBridge
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.protocols.responses import encoder as responses_encoder
from proxy.core.protocols.responses.context import ResponsesContext
from tests.core.protocols.responses.checker import check
from tests.support.normalizer import bytewise, random_cuts

GOLDEN = Path(__file__).parents[3] / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8"))
SINGLE = [c for c in CASES if len(c["expect"]) == 1]
TERMINAL = {
    "stop": "response.completed",
    "tool_calls": "response.completed",
    "length": "response.incomplete",
    "content_filter": "response.incomplete",
}


def translate(case: dict[str, Any], reads: list[bytes]) -> bytes:
    # two factories: which of the two draws first depends on where the reads are cut
    calls, items = itertools.count(1), itertools.count(1)
    normalizer = StreamNormalizer(
        UpstreamOptions(dialects=tuple(case.get("dialects", ()))),
        RequestInfo.from_body(REQUESTS[case["request"]]),
        new_id=lambda: f"call{next(calls):05d}",
    )
    encoder = responses_encoder(
        context=ResponsesContext(model="client-model"),
        new_id=lambda: f"item{next(items):05d}",
        stream=True,
    )
    bridge = ChatBridge(ChatSSEStream(normalizer), encoder)
    out = [b for read in reads for b in bridge.feed(read)]
    out += bridge.close(complete=case["complete"])
    return b"".join(out)


def assert_expected(case: dict[str, Any], body: bytes) -> None:
    expect = case["expect"][0]
    complete = case["complete"]
    if complete and expect.get("error") is not None:
        checked = check(body)
        assert checked.events[-1]["type"] == "response.failed"
    else:
        checked = check(body, complete=complete)
        if complete:
            finish = expect["finish_reason"] or "stop"
            assert checked.events[-1]["type"] == TERMINAL[finish]
    # a cut stream's last item never ended: what it had streamed counts
    assert checked.text_so_far == expect["content"]
    assert checked.reasoning == expect.get("reasoning", checked.reasoning)
    assert len(checked.calls_so_far) == len(expect["calls"])
    for call, want in zip(checked.calls_so_far, expect["calls"], strict=True):
        assert call["type"] == "function_call"
        assert call["name"] == want["name"]
        assert call["call_id"] == want["id"] if want["id"] is not None else call["call_id"]
        if "arguments" in want:
            assert json.loads(call["arguments"] or "{}") == want["arguments"]
        else:
            assert call["arguments"] == want["arguments_text"]
    if complete and expect["finish_reason"] == "length" and checked.calls:
        assert checked.calls[-1]["status"] in ("completed", "incomplete")


single = pytest.mark.parametrize("case", SINGLE, ids=[c["name"] for c in SINGLE])


@single
def test_golden_case_translates_to_a_canonical_responses_stream(case: dict[str, Any]):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    whole = translate(case, [body])
    assert_expected(case, whole)
    assert translate(case, bytewise(body)) == whole
    for pieces in random_cuts(body, seed=case["name"]):
        assert translate(case, pieces) == whole


def test_every_single_choice_case_is_translated():
    assert len(SINGLE) >= 50
