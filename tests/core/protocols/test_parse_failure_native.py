"""Issue 24 item 8 in the native modes: llama-server's error streams on /v1/responses and
/v1/messages carry the same ``Failed to parse input at pos N: <the model's text>``; when the
text holds whole tool-call blocks, the client gets the calls and a successful end instead of
the error (``parse-failure-recovered``); turned off, the error (in its protocol's shape)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.messages.native.stream import NativeMessages
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from proxy.core.repairs import Repair
from tests.core.protocols.messages.checker import check as check_messages
from tests.core.protocols.messages.native_helpers import every_cut, repair
from tests.core.protocols.responses.checker import check as check_responses
from tests.support.normalizer import bytewise

FIELD = Path(__file__).parents[2] / "fixtures" / "field"
RESPONSES = (FIELD / "llamacpp-parse-failure-with-markup.responses.sse").read_bytes()
MESSAGES = (FIELD / "llamacpp-parse-failure-with-markup.messages.sse").read_bytes()
SCHEMA = {"type": "object", "properties": {"location": {"type": "string"}}}
RESPONSES_REQUEST = {
    "model": "m",
    "input": "weather?",
    "tools": [{"type": "function", "name": "get_weather", "parameters": SCHEMA}],
}
MESSAGES_REQUEST = {
    "model": "m",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": "weather?"}],
    "tools": [{"name": "get_weather", "input_schema": SCHEMA}],
}


def responses(body: bytes, pieces: list[bytes] | None = None, **options: Any) -> tuple[bytes, Any]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(RESPONSES_REQUEST),
        options=UpstreamOptions(**options),
    )
    out = [b for piece in (pieces or [body]) for b in stream.feed(piece)]
    return b"".join([*out, *stream.close(complete=True)]), stream.repairs


def test_a_responses_client_gets_the_call_and_a_completed_response() -> None:
    whole, repairs = responses(RESPONSES)
    assert responses(RESPONSES, bytewise(RESPONSES))[0] == whole
    checked = check_responses(whole)
    assert checked.response is not None
    assert checked.response["status"] == "completed"
    assert [(c["name"], json.loads(c["arguments"])) for c in checked.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert b"Failed to parse" not in whole
    assert repairs[Repair.PARSE_FAILURE_RECOVERED] == 1
    assert Repair.ERROR_RESHAPED not in repairs


def test_turned_off_a_responses_client_gets_the_failure() -> None:
    out, repairs = responses(RESPONSES, recover_parse_failures=False)
    checked = check_responses(out)
    assert checked.response is not None
    assert checked.response["status"] == "failed"
    assert "Failed to parse input at pos 0" in checked.response["error"]["message"]
    assert Repair.PARSE_FAILURE_RECOVERED not in repairs


def test_a_messages_client_gets_the_call_and_tool_use() -> None:
    for pieces in every_cut(MESSAGES, "parse-failure"):
        out, repairs = repair(pieces, MESSAGES_REQUEST)
        result = check_messages(out)
        assert [(b["name"], b["input"]) for b in result.tool_uses] == [
            ("get_weather", {"location": "Paris"})
        ]
        assert result.tool_uses[0]["id"].startswith("toolu_")
        assert result.message["stop_reason"] == "tool_use"
        assert result.error is None
        assert repairs[Repair.PARSE_FAILURE_RECOVERED] == 1


def test_turned_off_a_messages_client_gets_the_error() -> None:
    out, repairs = repair(MESSAGES, MESSAGES_REQUEST, recover_parse_failures=False)
    result = check_messages(out)
    assert result.error is not None
    assert result.error["message"].startswith("Failed to parse input at pos 0")
    assert result.tool_uses == []
    assert Repair.PARSE_FAILURE_RECOVERED not in repairs


def test_a_text_without_a_whole_block_stays_an_error_in_both() -> None:
    cut = b"</function>\\n</tool_call>"
    assert cut in MESSAGES
    assert cut in RESPONSES
    out, repairs = repair(MESSAGES.replace(cut, b""), MESSAGES_REQUEST)
    assert check_messages(out).error is not None
    out, repairs = responses(RESPONSES.replace(cut, b""))
    checked = check_responses(out)
    assert checked.response is not None
    assert checked.response["status"] == "failed"
    assert Repair.PARSE_FAILURE_RECOVERED not in repairs


def test_a_message_delta_before_the_failure_is_no_longer_held() -> None:
    at = MESSAGES.index(b"event: error")
    delta = (
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":{"output_tokens":3}}\n\n'
    )
    stream = NativeMessages(lambda: "x", MESSAGES_REQUEST, options=UpstreamOptions())
    out = b"".join(
        [*stream.feed(MESSAGES[:at] + delta + MESSAGES[at:]), *stream.close(complete=True)]
    )
    result = check_messages(out)
    assert result.message["stop_reason"] == "tool_use"  # the calls' end, one message_delta
    assert stream.held_bytes == 0
