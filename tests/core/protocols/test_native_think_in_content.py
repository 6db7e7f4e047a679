"""``think_in_content`` in the native modes' whole answers (issue 24 items 11 and 3b): a
native Message's first text block, or a native Response's first message, that begins with a
``<think>`` block gets it as reasoning (a thinking block; a reasoning item with its summary,
as translate mode writes one); off, the default, the body passes as it came."""

from __future__ import annotations

import itertools
import json
from typing import Any

import orjson
import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.registry import CLIENT_PROTOCOLS

TEXT = "<think>\nThe user wants the weather.\n</think>\n\nIt is sunny in Paris."
REASONING, REST = "\nThe user wants the weather.\n", "\n\nIt is sunny in Paris."
MESSAGE = orjson.dumps(
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
RESPONSE = orjson.dumps(
    {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": TEXT, "annotations": []}],
            }
        ],
        "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
    }
)
REQUESTS: dict[str, Any] = {
    "messages": {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "go"}]},
    "responses": {"model": "m", "input": "go"},
}


def repaired(protocol: str, body: bytes, **options: Any) -> tuple[Any, Any, bytes]:
    counter = itertools.count(1)
    out, repairs = CLIENT_PROTOCOLS[protocol].native_completion(
        body=body,
        request=REQUESTS[protocol],
        options=UpstreamOptions(**options),
        new_id=lambda: f"id{next(counter)}",
    )
    return json.loads(out), repairs, out


def test_a_whole_native_message_gets_a_thinking_block() -> None:
    message, repairs, _ = repaired("messages", MESSAGE, think_in_content=True)
    assert message["content"] == [
        {"type": "thinking", "thinking": REASONING, "signature": ""},
        {"type": "text", "text": REST},
    ]
    assert repairs["think-in-content"] == 1


def test_a_whole_native_response_gets_a_reasoning_item() -> None:
    response, repairs, _ = repaired("responses", RESPONSE, think_in_content=True)
    reasoning, message = response["output"]
    assert reasoning["type"] == "reasoning"
    assert reasoning["summary"] == [{"type": "summary_text", "text": REASONING}]
    assert message["content"][0]["text"] == REST
    assert repairs["think-in-content"] == 1


@pytest.mark.parametrize(("protocol", "body"), [("messages", MESSAGE), ("responses", RESPONSE)])
def test_without_the_option_the_body_passes_as_it_came(protocol: str, body: bytes) -> None:
    _, repairs, out = repaired(protocol, body)
    assert out == body
    assert "think-in-content" not in repairs
