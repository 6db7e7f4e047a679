"""Issue 24 item 8: llama-server's ``Failed to parse input at pos N: <the model's text>``
(llama.cpp#20532, #20761, #24644) answered with the calls its text holds, on every path that
meets it: the core module (proxy/core/parse_failure.py) and the chat stream; the native
repairers' and the shell's cases are in their own tests (test_parse_failure_native.py and
tests/e2e/test_parse_failure.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.parse_failure import error_message, recover
from proxy.core.repairs import Repair
from tests.support.normalizer import bytewise, eventwise, run
from tests.support.strict_checker import check, reconstruct

FIELD = Path(__file__).parents[1] / "fixtures" / "field"
QWEN_BLOCK = (
    "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n"
    "</function>\n</tool_call>"
)
WEATHER = RequestInfo(
    tools=[
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
            },
        }
    ]
)


def failure(text: str, pos: int = 0) -> str:
    return f"Failed to parse input at pos {pos}: {text}"


def test_the_fixtures_500_holds_one_whole_call() -> None:
    body = json.loads((FIELD / "llamacpp-parse-failure-with-markup.chat.500.json").read_text())
    recovered = recover(error_message(body), WEATHER.tools)
    assert recovered is not None
    assert [(c.name, json.loads(c.arguments)) for c in recovered.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert recovered.text == ""


def test_text_around_the_blocks_and_two_calls_are_kept() -> None:
    hermes = '<tool_call>\n{"name": "f", "arguments": {"a": %d}}\n</tool_call>'
    recovered = recover(failure("Let me look. " + hermes % 1 + hermes % 2, pos=12))
    assert recovered is not None
    assert recovered.text == "Let me look."
    assert [json.loads(c.arguments) for c in recovered.calls] == [{"a": 1}, {"a": 2}]


@pytest.mark.parametrize(
    "message",
    [
        failure("Hello! I cannot help with that."),  # no block: the error goes on
        failure('<TOOLCALL>[{"name": "broken", "arguments": {}</TOOLCALL>'),  # broken JSON
        failure(QWEN_BLOCK[: QWEN_BLOCK.index("</function>")]),  # cut inside the block
        "The model produced output that does not match the expected peg-native format",
        QWEN_BLOCK,  # the model's text, but not in llama-server's failure
        None,
    ],
)
def test_no_whole_block_no_recovery(message: object) -> None:
    assert recover(message, WEATHER.tools) is None


CHAT = (FIELD / "llamacpp-parse-failure-with-markup.chat.sse").read_bytes()


@pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])
def test_the_chat_stream_gets_the_call_instead_of_the_error(coalesce: bool) -> None:
    options = UpstreamOptions(coalesce=coalesce)
    whole, normalizer = run([CHAT], options=options, request=WEATHER)
    for pieces in (eventwise(CHAT), bytewise(CHAT)):
        assert run(pieces, options=options, request=WEATHER)[0] == whole
    assert check(whole, form="S2" if coalesce else "S1") == []
    seen = reconstruct(whole).choices[0]
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert seen.finish_reason == "tool_calls"
    assert b"Failed to parse" not in whole
    assert whole.endswith(b"data: [DONE]\n\n")
    assert normalizer.repairs[Repair.PARSE_FAILURE_RECOVERED] == 1


def test_the_recovered_calls_follow_the_role_the_stream_gave_without_a_second_one() -> None:
    # the stream's first chunk gives the role; it may go out unparsed (issue 29: the first
    # chunk on the fast path), and the recovered chunks must not say it again
    for pieces in ([CHAT], eventwise(CHAT), bytewise(CHAT)):
        out, _ = run(pieces, request=WEATHER)
        roles = [
            choice["delta"].get("role")
            for line in out.split(b"\n\n")
            if line.startswith(b"data: {")
            for choice in json.loads(line[6:]).get("choices", [])
        ]
        assert [role for role in roles if role is not None] == ["assistant"]


def test_llama_cpps_error_field_line_is_recovered_too() -> None:
    head = CHAT[: CHAT.index(b'data: {"error"')]
    error = {"code": 500, "message": failure(QWEN_BLOCK), "type": "server_error"}
    body = head + b"error: " + json.dumps(error).encode() + b"\n\n"
    out, normalizer = run([body], request=WEATHER)
    assert [c.name for c in reconstruct(out).choices[0].calls] == ["get_weather"]
    assert normalizer.repairs[Repair.PARSE_FAILURE_RECOVERED] == 1


def test_turned_off_the_error_goes_on_as_it_came() -> None:
    out, normalizer = run(
        [CHAT], options=UpstreamOptions(recover_parse_failures=False), request=WEATHER
    )
    assert b"Failed to parse input at pos 0" in out
    assert reconstruct(out).choices[0].calls == []
    assert Repair.PARSE_FAILURE_RECOVERED not in normalizer.repairs
    assert not out.endswith(b"data: [DONE]\n\n")
