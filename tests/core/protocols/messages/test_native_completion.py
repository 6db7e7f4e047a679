"""Native mode, ``stream: false``: a server's own Message object, repaired as one piece."""

from __future__ import annotations

import json
from typing import Any

from proxy.core.markup import DIALECTS
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages import native_completion
from proxy.core.repairs import Repair
from proxy.shell.random_ids import new_id_factory
from tests.core.protocols.messages.native_helpers import TOOLS_REQUEST

EVERY = UpstreamOptions(dialects=tuple(DIALECTS))
NONE = UpstreamOptions()
NEW_ID = new_id_factory()


def message(content: list[dict[str, Any]], stop_reason: str | None = "end_turn") -> bytes:
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": content,
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": 3, "output_tokens": 4},
    }
    return json.dumps(body).encode()


def test_a_canonical_message_comes_back_byte_for_byte():
    body = message(
        [
            {"type": "text", "text": "hi"},
            {"type": "tool_use", "id": "t", "name": "get_weather", "input": {"location": "x"}},
        ],
        "tool_use",
    )
    assert native_completion(body=body, request=TOOLS_REQUEST, options=EVERY, new_id=NEW_ID) == (
        body,
        {},
    )


def test_llamacpp_tool_use_without_input_and_end_turn_is_repaired():
    body = message([{"type": "tool_use", "id": "t", "name": "get_weather"}], "end_turn")
    out, repairs = native_completion(body=body, request=TOOLS_REQUEST, options=EVERY, new_id=NEW_ID)
    fixed = json.loads(out)
    assert fixed["content"] == [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {}}]
    assert fixed["stop_reason"] == "tool_use"
    assert list(fixed) == list(json.loads(body)), "keys keep their places"
    assert repairs == {Repair.TOOL_USE_INPUT_MISSING: 1, Repair.STOP_REASON_NOT_TOOL_USE: 1}


def test_qwen3_coder_markup_in_a_text_block_becomes_a_tool_use_block():
    text = "Sure.\n<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
    out, repairs = native_completion(
        body=message([{"type": "text", "text": text}]),
        request=TOOLS_REQUEST,
        options=EVERY,
        new_id=NEW_ID,
    )
    fixed = json.loads(out)
    assert [b["type"] for b in fixed["content"]] == ["text", "tool_use"]
    assert fixed["content"][0]["text"].strip() == "Sure."
    assert fixed["content"][1]["name"] == "get_weather"
    assert fixed["content"][1]["input"] == {"location": "Paris"}
    assert fixed["content"][1]["id"].startswith("toolu_")
    assert fixed["stop_reason"] == "tool_use"
    assert repairs["markup-in-content:qwen3_coder"] == 1


def test_a_body_that_is_no_message_is_left_alone():
    for body in (b"not json", b'{"type": "error", "error": {"type": "api_error", "message": "x"}}'):
        assert native_completion(
            body=body, request=TOOLS_REQUEST, options=EVERY, new_id=NEW_ID
        ) == (body, {})


def test_markup_stays_text_when_the_upstream_enables_no_dialect():
    text = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
    body = message([{"type": "text", "text": text}])
    assert native_completion(body=body, request=TOOLS_REQUEST, options=NONE, new_id=NEW_ID) == (
        body,
        {},
    )
