"""Markup that breaks inside a call in a native stream's text (issue 24 items 4 and 3c): the
block is given back as the exact text it was, and counted as ``markup-broken``, as in chat
(the native text modules once counted only a ``CallClose`` carrying an error, which the
markup engine no longer gives since item 4)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.registry import CLIENT_PROTOCOLS
from tests.fixtures.field import report

FIELD = Path(__file__).parents[2] / "fixtures" / "field"
BROKEN_OPEN = b'<TOOLCALL>[{\\"name\\": \\"broken\\", \\"arguments\\": {}'
TEXT = (
    '<TOOLCALL>[{"name": "broken", "arguments": {}\nThe user wants the weather.\n'
    "</TOOLCALL>\n\nIt is sunny in Paris."
)
TOOL = {"type": "object"}
REQUESTS: dict[str, dict[str, Any]] = {
    "responses": {
        "model": "m",
        "stream": True,
        "input": "go",
        "tools": [{"type": "function", "name": "broken", "parameters": TOOL}],
    },
    "messages": {
        "model": "m",
        "stream": True,
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "go"}],
        "tools": [{"name": "broken", "input_schema": TOOL}],
    },
}


def _ids() -> Any:
    counter = itertools.count(1)
    return lambda: f"id{next(counter):05d}"


@pytest.mark.parametrize("protocol", ["responses", "messages"])
def test_a_native_streams_broken_block_is_its_text_counted(protocol: str) -> None:
    body = (FIELD / f"think-in-text.{protocol}.sse").read_bytes()
    body = body.replace(b"<think>", BROKEN_OPEN).replace(b"</think>", b"</TOOLCALL>")
    native = CLIENT_PROTOCOLS[protocol].native(
        new_id=_ids(), request=REQUESTS[protocol], options=UpstreamOptions(dialects=("nemotron",))
    )
    out = b"".join([*native.feed(body), *native.close(complete=True)])
    seen = report.read_responses(out) if protocol == "responses" else report.read_messages(out)
    assert seen.calls == []
    assert seen.content == TEXT
    assert native.repairs["markup-broken"] == 1


def test_a_whole_native_messages_broken_block_is_its_text_counted() -> None:
    body = orjson.dumps(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": TEXT}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
    )
    out, repairs = CLIENT_PROTOCOLS["messages"].native_completion(
        body=body,
        request={**REQUESTS["messages"], "stream": False},
        options=UpstreamOptions(dialects=("nemotron",)),
        new_id=_ids(),
    )
    message = json.loads(out)
    assert message["content"] == [{"type": "text", "text": TEXT}]
    assert message["stop_reason"] == "end_turn"
    assert repairs["markup-broken"] == 1
