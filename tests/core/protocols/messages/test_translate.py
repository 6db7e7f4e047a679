"""Translate mode: every single-choice chat golden stream, repaired by the chat normalizer and
encoded for a Messages client, is a canonical Messages stream (the strict checker) that says
what the golden case's ``expect`` says, and the same bytes however the upstream's are cut."""

from __future__ import annotations

import json
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.translate_helpers import GOLDEN, REQUESTS, SINGLE, translate
from tests.support.normalizer import bytewise, random_cuts

single = pytest.mark.parametrize("case", SINGLE, ids=[c["name"] for c in SINGLE])
FINISHED = [c for c in SINGLE if c["complete"] and c["expect"][0]["finish_reason"] is not None]


def options(case: dict[str, Any]) -> UpstreamOptions:
    """The markup dialects the golden case turns on (none when it names none)."""
    return UpstreamOptions(dialects=tuple(case.get("dialects", ())))


def run(case: dict[str, Any], reads: list[bytes]) -> bytes:
    return translate(
        REQUESTS[case["request"]], reads, complete=case["complete"], options=options(case)
    )[0]


def expected_stop_reason(expect: dict[str, Any]) -> str:
    if expect["finish_reason"] == "length" or any("arguments_text" in c for c in expect["calls"]):
        return "max_tokens"
    if expect["finish_reason"] == "content_filter":
        return "refusal"
    return "tool_use" if expect["calls"] else "end_turn"


@single
def test_golden_stream_is_canonical_messages_with_the_expected_calls(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    out = run(case, [body])
    result = check(out, finished=case["complete"])
    expect = case["expect"][0]
    if not case["complete"]:
        assert not result.finished, "a cut stream must not end cleanly"
        assert b"message_stop" not in out
        return
    assert result.text == expect["content"]
    if expect["finish_reason"] is None:  # the upstream reported an error in the stream
        assert result.error is not None
        assert result.error["type"] == "api_error"
        assert not result.finished
        return
    assert result.error is None
    assert result.message["stop_reason"] == expected_stop_reason(expect)
    assert result.message["model"] == "claude-test"
    assert len(result.tool_uses) == len(expect["calls"])
    for block, want in zip(result.tool_uses, expect["calls"], strict=True):
        assert block["name"] == want["name"]
        if want["id"] is not None:
            assert block["id"] == want["id"]
        if "arguments" in want:
            assert block["input"] == (want["arguments"] or {})
        else:
            assert block["input_unparsed"] == want["arguments_text"]


@single
def test_golden_stream_translates_the_same_however_it_is_cut(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    whole = run(case, [body])
    assert run(case, bytewise(body)) == whole
    for reads in random_cuts(body, case["name"], count=4):
        assert run(case, reads) == whole


@pytest.mark.parametrize("case", FINISHED, ids=[c["name"] for c in FINISHED])
def test_non_streaming_message_says_what_the_stream_says(case):
    body = (GOLDEN / f"{case['name']}.in.sse").read_bytes()
    out, encoder = translate(REQUESTS[case["request"]], [body], options=options(case))
    streamed = check(out)
    message = encoder.response()
    assert message["stop_reason"] == streamed.message["stop_reason"]
    assert [b["type"] for b in message["content"]] == [b["type"] for b in streamed.blocks]
    for got, want in zip(message["content"], streamed.blocks, strict=True):
        if want["type"] == "tool_use":
            assert (got["id"], got["name"]) == (want["id"], want["name"])
            assert got["input"] == want.get("input", {})
        elif want["type"] == "text":
            assert got["text"] == want["text"]
    json.dumps(message)
