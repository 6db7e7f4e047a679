"""A native Messages block's lifecycle (messages/native/lifecycle.py ``BLOCK``): open until
its stop or the proxy's, whichever comes first; what a stream does with the events of a block
that is not open."""

from __future__ import annotations

from typing import Any

import pytest

from proxy.core.errors import NormalizerError
from proxy.core.protocols.messages.native.lifecycle import (
    BLOCK,
    BlockPhase,
    BlockStep,
    block_after,
)
from proxy.core.repairs import Repair
from tests.core.protocols.messages.native_helpers import repair
from tests.core.protocols.messages.streams import sse


def test_every_block_phase_is_reached_from_open_and_only_open_is_stopped_by_the_proxy() -> None:
    reached = {BlockPhase.OPEN}
    while more := {BLOCK[p, s] for p, s in BLOCK if p in reached} - reached:
        reached |= more
    assert reached == set(BlockPhase)
    assert {p for p, s in BLOCK if s is BlockStep.PROXY_STOPS} == {BlockPhase.OPEN}
    assert all((p, BlockStep.UPSTREAM_STOPS) in BLOCK for p in BlockPhase)


def test_the_proxy_stopping_a_stopped_block_is_its_own_error() -> None:
    stopped = block_after(BlockPhase.OPEN, BlockStep.UPSTREAM_STOPS)
    with pytest.raises(NormalizerError, match="no block transition"):
        block_after(stopped, BlockStep.PROXY_STOPS)


def _start(index: int, kind: str) -> dict[str, Any]:
    block: dict[str, Any] = {"type": kind, kind: ""} if kind != "tool_use" else {}
    return {"type": "content_block_start", "index": index, "content_block": block}


def _text(index: int, text: str) -> dict[str, Any]:
    delta = {"type": "text_delta", "text": text}
    return {"type": "content_block_delta", "index": index, "delta": delta}


MESSAGE_START: dict[str, Any] = {
    "type": "message_start",
    "message": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 0},
    },
}
END: list[dict[str, Any]] = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 3}},
    {"type": "message_stop"},
]


def test_a_block_stopped_by_the_proxy_drops_its_late_stop_and_counts_its_late_delta() -> None:
    # llama.cpp's overlap: block 0 is stopped by the proxy when block 1 starts; block 0's own
    # stop then comes late (dropped) and a delta after it is counted as after the stop
    events = [
        MESSAGE_START,
        _start(0, "text"),
        _text(0, "a"),
        _start(1, "text"),
        _text(1, "b"),
        {"type": "content_block_stop", "index": 0},
        _text(0, "late"),
        {"type": "content_block_stop", "index": 1},
        *END,
    ]
    out, repairs = repair(sse(events), {"model": "m"})
    assert out.count(b'"type":"content_block_stop"') == 2
    assert b"late" not in out
    assert repairs[Repair.BLOCKS_OVERLAP] == 1
    assert repairs[Repair.DELTA_AFTER_STOP] == 1
