"""Non-streaming responses (``stream: false``) get the same repairs on message.tool_calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, normalize_completion
from tests.support.normalizer import counting_ids

FIXTURES = Path(__file__).parents[3] / "fixtures" / "upstream"
WEATHER = {"type": "function", "function": {"name": "get_weather"}}


def completion(message: dict[str, Any], finish: Any = "tool_calls", **choice: Any) -> bytes:
    body = {
        "id": "chatcmpl-n",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "message": message, "finish_reason": finish, **choice}],
        "usage": {"total_tokens": 9},
    }
    return json.dumps(body).encode()


def fix(body: bytes, request: Any = None) -> tuple[bytes, Any]:
    return normalize_completion(
        body, UpstreamOptions(), RequestInfo.from_body(request), new_id=counting_ids()
    )


def choice_of(body: bytes) -> dict[str, Any]:
    choice: dict[str, Any] = json.loads(body)["choices"][0]
    return choice


CANONICAL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_weather", "arguments": '{"location":"Paris"}'},
}


@pytest.mark.parametrize(
    "body",
    [
        completion(
            {"role": "assistant", "content": None, "tool_calls": [CANONICAL_CALL], "refusal": None}
        ),
        completion({"role": "assistant", "content": "Hello."}, "stop"),
        completion({"role": "assistant", "content": "cut"}, "length"),
        b"not json",
        b"[]",
        (FIXTURES / "llamacpp-b5477-stream-with-tools-rejected.body").read_bytes(),
    ],
    ids=["canonical", "text", "length", "not json", "not an object", "llama.cpp error body"],
)
def test_what_needs_nothing_comes_back_as_the_same_bytes(body):
    assert fix(body) == (body, {})


def test_tgi_3_object_arguments_and_stop():
    # TGI <= 3.0.x snapshot shape (quirks.md Q19, N3, N6)
    call = {
        "function": {
            "arguments": {"format": "celsius", "location": "Brooklyn, New York"},
            "description": None,
            "name": "get_current_weather",
        },
        "id": "0",
        "type": "function",
    }
    out, repairs = fix(
        completion({"role": "assistant", "content": None, "tool_calls": [call]}, "stop")
    )
    choice = choice_of(out)
    assert choice["message"]["tool_calls"] == [
        {
            "id": "0",
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "arguments": '{"format":"celsius","location":"Brooklyn, New York"}',
            },
        }
    ]
    assert choice["finish_reason"] == "tool_calls"
    assert set(repairs) == {"arguments-not-a-string", "explicit-null-fields", "finish-reason-stop"}


def test_tgi_1_4_object_tool_calls_with_parameters_and_an_integer_id():
    # TGI 1.4.x snapshot (quirks.md N2)
    calls = {
        "function": {
            "description": None,
            "name": "tools",
            "parameters": {"format": "celsius", "location": "New York, NY", "num_days": 14},
        },
        "id": 0,
        "type": "function",
    }
    out, repairs = fix(
        completion({"role": "assistant", "content": None, "tool_calls": calls}, "eos_token")
    )
    choice = choice_of(out)
    assert choice["message"]["tool_calls"] == [
        {
            "id": "0",
            "type": "function",
            "function": {
                "name": "tools",
                "arguments": '{"format":"celsius","location":"New York, NY","num_days":14}',
            },
        }
    ]
    assert choice["finish_reason"] == "tool_calls"
    assert {
        "tool_calls-not-an-array",
        "parameters-instead-of-arguments",
        "id-not-a-string",
        "finish-reason-nonstandard",
    } <= set(repairs)


def test_missing_ids_types_and_arguments_are_filled_in():
    calls = [
        {"function": {"name": "get_weather", "arguments": ""}},
        {"type": "function", "function": {"name": "get_time", "id": "fn_2"}},
    ]
    out, repairs = fix(completion({"role": "assistant", "content": None, "tool_calls": calls}))
    assert choice_of(out)["message"]["tool_calls"] == [
        {
            "id": "call00001",
            "type": "function",
            "function": {"name": "get_weather", "arguments": "{}"},
        },
        {"id": "fn_2", "type": "function", "function": {"name": "get_time", "arguments": "{}"}},
    ]
    assert set(repairs) == {"id-missing", "type-missing", "empty-arguments", "id-inside-function"}


def test_tool_calls_beside_the_message_move_into_it():
    # text-generation-webui v3.3 (quirks.md N4)
    body = completion(
        {"role": "assistant", "content": "calling"},
        "stop",
        tool_calls=[{**CANONICAL_CALL, "index": "0"}],
    )
    out, repairs = fix(body)
    choice = choice_of(out)
    assert "tool_calls" not in choice
    assert choice["message"]["tool_calls"] == [{"index": 0, **CANONICAL_CALL}]
    assert choice["finish_reason"] == "tool_calls"
    assert {"tool_calls-beside-message", "index-not-int", "finish-reason-stop"} <= set(repairs)


def test_a_call_without_a_name_takes_the_one_the_request_forces():
    body = completion(
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": None, "arguments": "{}"}}
            ],
        }
    )
    out, _ = fix(body, {"tools": [WEATHER]})
    assert choice_of(out)["message"]["tool_calls"][0]["function"]["name"] == "get_weather"


def test_length_is_never_turned_into_tool_calls():
    out, _ = fix(
        completion(
            {"role": "assistant", "tool_calls": [{**CANONICAL_CALL, "type": None}]}, "length"
        )
    )
    assert choice_of(out)["finish_reason"] == "length"


CUT_CALL = {**CANONICAL_CALL, "function": {"name": "get_weather", "arguments": '{"location":"Pa'}}


@pytest.mark.parametrize("finish", ["stop", "eos_token", ""])
def test_a_stop_after_a_cut_call_becomes_length_not_tool_calls(finish):
    out, repairs = fix(completion({"role": "assistant", "tool_calls": [CUT_CALL]}, finish))
    assert choice_of(out)["finish_reason"] == "length"
    assert repairs["args-truncated"] == 1
    assert "finish-reason-stop" not in repairs


def test_the_upstreams_own_tool_calls_finish_stays_after_a_cut_call():
    body = completion({"role": "assistant", "tool_calls": [CUT_CALL]}, "tool_calls")
    assert fix(body) == (body, {})


def test_a_stop_after_a_call_without_arguments_becomes_tool_calls():
    call = {**CANONICAL_CALL, "function": {"name": "get_weather", "arguments": ""}}
    out, repairs = fix(completion({"role": "assistant", "tool_calls": [call]}, "stop"))
    choice = choice_of(out)
    assert choice["message"]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert choice["finish_reason"] == "tool_calls"
    assert "args-truncated" not in repairs


def test_synthesized_ids_skip_ids_already_in_the_response():
    calls = [
        {"id": "call00001", "type": "function", "function": {"name": "a", "arguments": "{}"}},
        {"type": "function", "function": {"name": "b", "arguments": "{}"}},
    ]
    out, _ = fix(completion({"role": "assistant", "tool_calls": calls}))
    assert [c["id"] for c in choice_of(out)["message"]["tool_calls"]] == ["call00001", "call00002"]


def test_a_call_of_unknown_shape_leaves_the_calls_as_they_are():
    calls = [{"id": "c", "type": "function", "function": "not an object"}]
    body = completion({"role": "assistant", "tool_calls": calls}, "stop")
    out, _ = fix(body)
    choice = choice_of(out)
    assert choice["message"]["tool_calls"] == calls
    assert choice["finish_reason"] == "tool_calls"  # the finish still follows the calls


def test_a_body_too_deep_to_write_back_comes_back_as_it_was():
    deep: Any = {}
    for _ in range(300):
        deep = {"d": deep}
    body = completion(
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{}"}}],
        },
        "stop",
        deep=deep,
    )
    assert fix(body) == (body, {})
