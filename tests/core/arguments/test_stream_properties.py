"""Issue 25's properties through the streams, with heal_arguments and coerce_arguments on (each
call then held and sent whole): arguments that fit come out byte for byte identical, however
the upstream split them; arguments cut off are never healed, whether a token limit or a cut
stream ended them. Chat (which translate mode runs too), native Messages and native Responses,
over the real agents' tools."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from proxy.core.events import FinishReason
from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.repairs import Repair
from tests.core.arguments import responses_streams as r_streams
from tests.core.arguments.tools import agent_tools, arguments_texts, fitting
from tests.core.protocols.messages import streams as m_streams
from tests.core.protocols.messages.native_helpers import repair as m_repair
from tests.support.normalizer import run
from tests.support.streams import arguments, call_event, chunk_event, chunks

TOOLS = agent_tools("claude-code")
SAMPLED = [tool for tool in TOOLS if tool["function"]["name"] in ("Bash", "Edit", "Read", "Grep")]
FIXES = UpstreamOptions(heal_arguments=True, coerce_arguments=True)
PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
)
FIXED = {Repair.ARGS_HEALED, Repair.ARGS_COERCED}


def split(text: str, cuts: list[int]) -> list[str]:
    edges = [0, *sorted({c % (len(text) + 1) for c in cuts}), len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges) if b > a]


def chat_stream(name: str, fragments: list[str], finish: str) -> bytes:
    body = chunk_event({"role": "assistant", "content": None}) + call_event(0, "", name=name)
    body += b"".join(call_event(0, fragment) for fragment in fragments)
    return body + chunk_event({}, finish=finish) + b"data: [DONE]\n\n"


def messages_stream(name: str, fragments: list[str], stop: str) -> bytes:
    start = {"type": "tool_use", "id": "toolu_1", "name": name, "input": {}}
    events: list[dict[str, Any]] = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "m",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": start},
        *(
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "input_json_delta", "partial_json": fragment},
            }
            for fragment in fragments
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    ]
    return m_streams.sse(events)


def messages_request() -> dict[str, Any]:
    tools = [
        {"name": t["function"]["name"], "input_schema": t["function"]["parameters"]} for t in TOOLS
    ]
    return {"model": "m", "max_tokens": 64, "messages": [], "tools": tools}


def responses_stream(name: str, fragments: list[str], finish: FinishReason) -> bytes:
    return r_streams.stream(r_streams.call(0, name, *fragments), finish=finish)


def responses_request() -> dict[str, Any]:
    tools = [{"type": "function", **t["function"]} for t in TOOLS]
    return {"model": "m", "input": "go", "tools": tools}


def fitting_text(data: st.DataObject, tool: dict[str, Any]) -> str:
    schema = tool["function"]["parameters"]
    value = data.draw(fitting(schema))
    assume(isinstance(value, dict) and jsonschema_rs.validator_for(schema).is_valid(value))
    return data.draw(arguments_texts(value))


@pytest.mark.parametrize("tool", SAMPLED, ids=[t["function"]["name"] for t in SAMPLED])
@PROPERTY
@given(data=st.data(), cuts=st.lists(st.integers(0, 1 << 16), max_size=6))
def test_arguments_that_fit_come_out_byte_identical(tool, data, cuts):
    text = fitting_text(data, tool)
    name = tool["function"]["name"]
    fragments = split(text, cuts)
    out, normalizer = run(
        chat_stream(name, fragments, "tool_calls"),
        options=FIXES,
        request=RequestInfo.from_body({"tools": TOOLS}),
    )
    assert arguments(out) == text
    assert not FIXED & set(normalizer.repairs)
    assert not any(k.startswith("args-schema-mismatch") for k in normalizer.repairs)
    body = messages_stream(name, fragments, "tool_use")
    out, repairs = m_repair(body, messages_request(), heal_arguments=True, coerce_arguments=True)
    assert out == body  # held, then sent as it came
    assert not FIXED & set(repairs)
    body = responses_stream(name, fragments, FinishReason.TOOL_CALLS)
    out, repairs = r_streams.run([body], responses_request(), FIXES)
    assert out == body  # held until the terminal event, then sent as it came
    assert not FIXED & set(repairs)


@pytest.mark.parametrize("tool", SAMPLED, ids=[t["function"]["name"] for t in SAMPLED])
@PROPERTY
@given(data=st.data(), cuts=st.lists(st.integers(0, 1 << 16), max_size=6))
def test_arguments_cut_off_are_never_healed(tool, data, cuts):
    text = fitting_text(data, tool)
    # ... or written in the shapes a heal would fix, had nothing been cut
    text = data.draw(st.sampled_from([text, text.replace('"', "'"), text[:-1] + ",}"]))
    at = data.draw(st.integers(1, len(text) - 1))
    cut = text[:at]
    assume(cut.strip())
    name = tool["function"]["name"]
    fragments = split(cut, cuts)
    request = RequestInfo.from_body({"tools": TOOLS})
    for finish, complete in (("length", True), ("tool_calls", True), (None, False)):
        body = chat_stream(name, fragments, finish or "tool_calls")
        if finish is None:  # the stream itself cut before its finish
            body = body[: body.rindex(b"data: {")]
        out, normalizer = run(body, options=FIXES, request=request, complete=complete)
        assert Repair.ARGS_HEALED not in normalizer.repairs
        assert arguments(out) == cut
    body = messages_stream(name, fragments, "max_tokens")
    out, repairs = m_repair(body, messages_request(), heal_arguments=True)
    assert Repair.ARGS_HEALED not in repairs
    sent = "".join(
        e["delta"]["partial_json"]
        for e in chunks(out)
        if e.get("type") == "content_block_delta" and e["delta"].get("type") == "input_json_delta"
    )
    assert sent == cut  # as it came
    # native Responses: cut by the token limit (response.incomplete), ended completed all the
    # same (llama.cpp), or the stream itself cut before its terminal event
    for finish, complete in (
        (FinishReason.LENGTH, True),
        (FinishReason.TOOL_CALLS, True),
        (None, False),
    ):
        body = responses_stream(name, fragments, finish or FinishReason.TOOL_CALLS)
        if finish is None:
            body = body[: body.rindex(b"event: response.completed")]
        out, repairs = r_streams.run([body], responses_request(), FIXES, complete=complete)
        assert Repair.ARGS_HEALED not in repairs
        assert r_streams.sent_arguments(out) == [cut]
    # ... and a call of a response the token limit cut is never fixed, whole as it may look,
    # even where only the terminal event says so
    body = r_streams.items_completed(responses_stream(name, split(text, cuts), FinishReason.LENGTH))
    out, repairs = r_streams.run([body], responses_request(), FIXES)
    assert not FIXED & set(repairs)
    assert r_streams.sent_arguments(out) == [text]
