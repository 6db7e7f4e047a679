"""The matrix's own parts: the replayer serves what was recorded, the verdicts judge fairly."""

from __future__ import annotations

import dataclasses

import pytest

from tests.clients.cases import Expected, ExpectedCall, load_cases
from tests.clients.drivers import Call, Outcome
from tests.clients.replayer import replayer_app, split_events
from tests.clients.verdicts import judge

CASES = {case.name: case for case in load_cases()}
PARIS = {"location": "Paris", "unit": "celsius"}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_split_events_keeps_every_byte(case):
    pieces = split_events(case.body)
    assert b"".join(pieces) == case.body
    if case.content_type.startswith("text/event-stream"):
        assert len(pieces) == case.body.count(b"data:")


async def test_replayer_serves_the_recorded_body_by_model(aiohttp_client):
    client = await aiohttp_client(replayer_app(CASES.values()))
    for model in ("a_canonical", "streamed/a_canonical"):
        response = await client.post("/v1/chat/completions", json={"model": model})
        assert response.status == 200
        assert response.headers["Content-Type"] == "text/event-stream"
        assert await response.read() == CASES["a_canonical"].body


async def test_replayer_serves_error_and_non_stream_bodies_with_their_status(aiohttp_client):
    client = await aiohttp_client(replayer_app(CASES.values()))
    rejected = CASES["llamacpp-b5477-stream-with-tools-rejected"]
    response = await client.post("/v1/chat/completions", json={"model": rejected.name})
    assert response.status == 500
    assert await response.read() == rejected.body
    response = await client.post("/v1/chat/completions", json={"model": "o_nonstream_canonical"})
    assert response.headers["Content-Type"] == "application/json"
    assert await response.read() == CASES["o_nonstream_canonical"].body


async def test_replayer_lists_cases_and_refuses_unknown_models(aiohttp_client):
    client = await aiohttp_client(replayer_app(CASES.values()))
    listed = await (await client.get("/v1/models")).json()
    assert {m["id"] for m in listed["data"]} == set(CASES)
    response = await client.post("/v1/chat/completions", json={"model": "no-such-case"})
    assert response.status == 404


WEATHER = CASES["a_canonical"]


def _with_expect(**changes):
    return dataclasses.replace(WEATHER, expect=Expected(**changes))


def test_verdict_accepts_the_expected_call_as_text_or_object():
    for arguments in ('{"location": "Paris", "unit": "celsius"}', PARIS):
        outcome = Outcome(
            calls=(Call("call_1", "get_weather", arguments),), finish_reason="tool_calls"
        )
        assert judge(WEATHER, outcome).right


@pytest.mark.parametrize(
    ("call", "why"),
    [
        (Call("call_1call_1", "get_weather", PARIS), "id 'call_1call_1'"),
        (Call("call_1", "get_weatherget_weather", PARIS), "name 'get_weatherget_weather'"),
        (Call("call_1", "get_weather", '{}{"location": "Paris"}'), "not valid JSON"),
        (Call("call_1", "get_weather", "[object Object]"), "not valid JSON"),
        (Call("call_1", "get_weather", {}), "arguments {}"),
    ],
)
def test_verdict_names_what_is_wrong_with_a_call(call, why):
    verdict = judge(WEATHER, Outcome(calls=(call,), finish_reason="tool_calls"))
    assert not verdict.right
    assert any(why in reason for reason in verdict.reasons), verdict.reasons


def test_verdict_without_an_upstream_id_wants_a_unique_non_empty_one():
    case = _with_expect(
        finish_reason="tool_calls",
        calls=(ExpectedCall(name="get_weather", arguments=PARIS),) * 2,
    )
    made_up = Outcome(
        calls=(Call("a1", "get_weather", PARIS), Call("b2", "get_weather", PARIS)),
        finish_reason="tool_calls",
    )
    assert judge(case, made_up).right
    for ids in (("a1", "a1"), ("a1", ""), ("a1", None)):
        calls = tuple(Call(i, "get_weather", PARIS) for i in ids)
        assert not judge(case, dataclasses.replace(made_up, calls=calls)).right


def test_verdict_on_a_truncated_case_forgives_the_error_but_not_lost_text():
    case = _with_expect(outcome="truncated", content="<tool_call>")
    assert judge(case, Outcome(content="<tool_call>", error="Error: missing finish_reason")).right
    assert not judge(case, Outcome(content="", error="Error: missing finish_reason")).right


def test_verdict_on_an_error_case_wants_the_upstream_message():
    case = _with_expect(outcome="error", error_contains="Cannot use tools")
    assert judge(case, Outcome(error="InternalServerError: 500 Cannot use tools")).right
    assert not judge(case, Outcome(error="APIConnectionError: refused")).right
    assert not judge(case, Outcome()).right


def test_verdict_on_a_complete_case_counts_an_error_or_a_problem_as_wrong():
    right = Outcome(calls=(Call("call_1", "get_weather", PARIS),), finish_reason="tool_calls")
    assert judge(WEATHER, right).right
    for wrong in (
        dataclasses.replace(right, error="AI_InvalidResponseDataError"),
        dataclasses.replace(right, problems=("0 done events for 1 calls",)),
        dataclasses.replace(right, finish_reason="stop"),
        dataclasses.replace(right, content="stray"),
    ):
        assert not judge(WEATHER, wrong).right
