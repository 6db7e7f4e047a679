"""The matrix's own parts: the replayer serves what was recorded, the verdicts judge fairly."""

from __future__ import annotations

import dataclasses
import json

import aiohttp
import pytest

from tests.clients.cases import Expected, ExpectedCall, leaked_stream, load_cases
from tests.clients.drivers import Call, Outcome
from tests.clients.limits import Limit, load_limits
from tests.clients.replayer import replayer_app, split_events
from tests.clients.verdicts import judge

CASES = {case.name: case for case in load_cases()}
PARIS = {"location": "Paris", "unit": "celsius"}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES)
def test_split_events_keeps_every_byte(case):
    pieces = split_events(case.body)
    assert b"".join(pieces) == case.body
    if case.content_type.startswith("text/event-stream"):
        for piece in pieces[:-1]:
            assert piece.endswith((b"\n\n", b"\r\r")), piece
            assert b"\n\n" not in piece.rstrip(b"\r\n"), piece


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


def test_leaked_stream_carries_the_text_in_small_content_deltas():
    text = 'Hi.\n<tool_call>\n{"name": "get_weather"}</tool_call>'
    events = [e for e in split_events(leaked_stream(text)) if b"[DONE]" not in e]
    deltas = [json.loads(e.removeprefix(b"data: "))["choices"][0]["delta"] for e in events]
    assert "".join(d.get("content", "") for d in deltas) == text
    assert max(len(d.get("content", "")) for d in deltas) <= 4
    assert json.loads(events[-1].removeprefix(b"data: "))["choices"][0]["finish_reason"] == "stop"


async def test_replayer_breaks_the_connection_of_a_dropped_case(aiohttp_client):
    dropped = dataclasses.replace(WEATHER, ends="dropped")
    client = await aiohttp_client(replayer_app([dropped]))
    response = await client.post("/v1/chat/completions", json={"model": dropped.name})
    with pytest.raises(aiohttp.ClientPayloadError):
        await response.read()


def test_verdict_on_arguments_that_are_not_json_wants_the_text_or_lets_the_client_judge():
    case = _with_expect(
        finish_reason="length",
        calls=(ExpectedCall(name="get_weather", id="call_1", arguments_text='{"location": "Par'),),
    )

    def outcome(arguments, invalid=None):
        call = Call("call_1", "get_weather", arguments, invalid)
        return Outcome(calls=(call,), finish_reason="length")

    assert judge(case, outcome('{"location": "Par')).right
    assert judge(case, outcome('{"location": "Par', invalid="JSON parsing failed")).right
    assert judge(case, outcome({"location": "Par"})).right
    assert not judge(case, outcome('{"location": "Pa')).right


def test_verdict_counts_a_refused_call_as_wrong_when_its_arguments_are_json():
    call = Call("call_1", "get_weather", PARIS, invalid="NoSuchToolError")
    assert not judge(WEATHER, Outcome(calls=(call,), finish_reason="tool_calls")).right


def test_verdict_on_an_error_case_also_wants_the_text_before_the_error():
    case = _with_expect(outcome="error", content="Hel", error_contains="context size")
    assert judge(case, Outcome(content="Hel", error="APIError: context size exceeded")).right
    assert not judge(case, Outcome(content="", error="APIError: context size exceeded")).right


def test_a_limit_excuses_only_a_wrong_cell_whose_every_reason_it_names():
    limit = Limit(
        case=WEATHER.name,
        client="node-openai",
        target="streamed",
        reason="done events for 1 calls",
        why="a client's own fault on a shape the proxy keeps",
    )
    right = Outcome(calls=(Call("call_1", "get_weather", PARIS),), finish_reason="tool_calls")
    double = dataclasses.replace(right, problems=("2 done events for 1 calls",))
    assert limit.excuses(judge(WEATHER, double))
    assert not limit.excuses(judge(WEATHER, right))
    for worse in (
        dataclasses.replace(double, finish_reason="stop"),
        dataclasses.replace(double, error="Error: missing finish_reason"),
        dataclasses.replace(double, calls=()),
    ):
        verdict = judge(WEATHER, worse)
        assert not limit.excuses(verdict)
        assert limit.stray_reasons(verdict)


def test_every_recorded_limit_says_why_and_names_a_reason():
    for limit in load_limits().values():
        assert limit.reason.strip(), limit
        assert "quirks.md" in limit.why, limit
