"""Issue 25 through the chat stream and the whole chat completion: the schema check at each
call's end, calls past the first dropped under ``parallel_tool_calls: false``, and the heal
and coercion an upstream turned on (its calls then held and sent whole)."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.repairs import Repair
from tests.support.normalizer import bytewise, counting_ids, eventwise, run
from tests.support.streams import arguments, call_event, chunk_event, chunks

TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}, "timeout": {"type": "integer"}},
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    },
    {"type": "function", "function": {"name": "free"}},
]


def request(**extra: Any) -> RequestInfo:
    return RequestInfo.from_body({"tools": TOOLS, **extra})


def stream(*calls: tuple[str, list[str]], finish: str = "tool_calls") -> bytes:
    """A canonical chat stream: each call's opening, then its fragments; the finish; [DONE]."""
    body = chunk_event({"role": "assistant", "content": None})
    for index, (name, fragments) in enumerate(calls):
        body += call_event(index, "", name=name)
        for fragment in fragments:
            body += call_event(index, fragment)
    return body + chunk_event({}, finish=finish) + b"data: [DONE]\n\n"


def mismatches(repairs: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in repairs.items() if k.startswith("args-schema-mismatch")}


@pytest.mark.parametrize(
    ("name", "fragments", "kind"),
    [
        ("shell", ['{"command=ls"', ': ""}'], "required"),
        ("shell", ['{"command": "ls", "cwd": "/"}'], "unknown-property"),
        ("shell", ['{"command": "ls", "timeout": "5"}'], "type"),
        ("nope", ["{}"], "unknown-tool"),
    ],
)
def test_a_mismatch_is_counted_at_the_calls_end_and_changes_no_byte(name, fragments, kind):
    body = stream((name, fragments))
    for reads in (body, eventwise(body), bytewise(body)):
        out, normalizer = run(reads, request=request())
        assert out == body
        assert mismatches(normalizer.repairs) == {f"args-schema-mismatch:{kind}": 1}


def test_a_call_that_fits_and_a_tool_without_parameters_count_nothing():
    body = stream(("shell", ['{"command": ', '"ls"}']), ("free", ['{"any": [1]}']))
    out, normalizer = run(body, request=request())
    assert out == body
    assert mismatches(normalizer.repairs) == {}


def test_a_request_without_tools_builds_no_rules():
    body = stream(("nope", ["{}"]))
    _, normalizer = run(body, request=RequestInfo.from_body({}))
    assert normalizer._ctx.rules is None
    assert mismatches(normalizer.repairs) == {}


def test_markup_calls_are_checked_too():
    text = '<tool_call>\n{"name": "shell", "arguments": {"timeout": 1}}\n</tool_call>'
    body = (
        chunk_event({"role": "assistant", "content": text})
        + chunk_event({}, finish="stop")
        + b"data: [DONE]\n\n"
    )
    _, normalizer = run(body, options=UpstreamOptions(dialects=("hermes",)), request=request())
    assert mismatches(normalizer.repairs) == {"args-schema-mismatch:required": 1}


# -- parallel_tool_calls: false -----------------------------------------------------------


def test_calls_past_the_first_are_dropped_when_one_was_asked_for():
    body = stream(("shell", ['{"command": "a"}']), ("shell", ['{"comm', 'and": "b"}']))
    for reads in (body, eventwise(body), bytewise(body)):
        out, normalizer = run(reads, request=request(parallel_tool_calls=False))
        calls = [
            c for chunk in chunks(out) for c in chunk["choices"][0]["delta"].get("tool_calls", ())
        ]
        assert {c["index"] for c in calls} == {0}
        assert arguments(out) == '{"command": "a"}'
        assert normalizer.repairs[Repair.PARALLEL_CALL_DROPPED] == 1
        assert "".join(normalizer.dropped_arguments) == '{"command": "b"}'
        assert chunks(out)[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_the_upstreams_opt_out_keeps_every_call():
    body = stream(("shell", ['{"command": "a"}']), ("shell", ['{"command": "b"}']))
    options = UpstreamOptions(enforce_parallel_tool_calls=False)
    out, normalizer = run(body, options=options, request=request(parallel_tool_calls=False))
    assert out == body
    assert Repair.PARALLEL_CALL_DROPPED not in normalizer.repairs


def test_parallel_calls_allowed_are_kept():
    body = stream(("shell", ['{"command": "a"}']), ("shell", ['{"command": "b"}']))
    out, _ = run(body, request=request(parallel_tool_calls=True))
    assert out == body


# -- heal and coerce ------------------------------------------------------------------------

HEAL = UpstreamOptions(heal_arguments=True)
COERCE = UpstreamOptions(coerce_arguments=True)


def one_call(out: bytes) -> str:
    calls = [c for chunk in chunks(out) for c in chunk["choices"][0]["delta"].get("tool_calls", ())]
    assert len(calls) == 1, calls  # held and sent whole, in one piece
    return str(calls[0]["function"]["arguments"])


@pytest.mark.parametrize(
    "fragments",
    [
        ["{'command': 'ls',", "}"],
        ['{"command": "echo\n', 'hi"}'],
        ['{"command": "ls", "timeout": 5,}'],
    ],
)
def test_almost_json_is_healed_whole_at_the_calls_end(fragments):
    out, normalizer = run(stream(("shell", fragments)), options=HEAL, request=request())
    assert orjson.loads(one_call(out))["command"] in ("ls", "echo\nhi")
    assert normalizer.repairs[Repair.ARGS_HEALED] == 1
    assert mismatches(normalizer.repairs) == {}


def test_a_call_cut_by_the_token_limit_is_never_healed():
    body = stream(("shell", ["{'command': 'ls',", "}"]), finish="length")
    out, normalizer = run(body, options=HEAL, request=request())
    assert one_call(out) == "{'command': 'ls',}"
    assert Repair.ARGS_HEALED not in normalizer.repairs
    assert chunks(out)[-1]["choices"][0]["finish_reason"] == "length"


def test_a_string_for_an_integer_is_coerced():
    body = stream(("shell", ['{"command": "ls", ', '"timeout": "5"}']))
    out, normalizer = run(body, options=COERCE, request=request())
    assert orjson.loads(one_call(out)) == {"command": "ls", "timeout": 5}
    assert normalizer.repairs[Repair.ARGS_COERCED] == 1
    assert mismatches(normalizer.repairs) == {}


def test_a_call_that_fits_goes_out_byte_for_byte_when_healing_is_on():
    text = '{"command":  "ls" ,"timeout":5 }'
    out, normalizer = run(stream(("shell", [text[:9], text[9:]])), options=HEAL, request=request())
    assert one_call(out) == text
    assert not {Repair.ARGS_HEALED, Repair.ARGS_COERCED} & set(normalizer.repairs)


def test_without_tools_healing_holds_nothing():
    body = stream(("shell", ["{'command': 'ls',", "}"]))
    out, _ = run(body, options=HEAL, request=RequestInfo.from_body({}))
    assert out == body


# -- the whole completion ---------------------------------------------------------------------


def completion(*calls: tuple[str, str], finish: str = "tool_calls") -> bytes:
    tool_calls = [
        {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": args}}
        for i, (name, args) in enumerate(calls)
    ]
    message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return orjson.dumps(
        {
            "id": "c",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
    )


def whole(body: bytes, options: UpstreamOptions, info: RequestInfo):
    fixed, repairs = normalize_completion(body, options, info, new_id=counting_ids())
    return fixed, repairs


def test_a_whole_completion_is_checked_and_unchanged():
    body = completion(("shell", '{"command": "ls", "timeout": "5"}'))
    fixed, repairs = whole(body, UpstreamOptions(), request())
    assert fixed is body
    assert mismatches(repairs) == {"args-schema-mismatch:type": 1}


def test_a_whole_completion_keeps_one_call_when_one_was_asked_for():
    body = completion(("shell", '{"command": "a"}'), ("shell", '{"command": "b"}'))
    fixed, repairs = whole(body, UpstreamOptions(), request(parallel_tool_calls=False))
    [call] = orjson.loads(fixed)["choices"][0]["message"]["tool_calls"]
    assert call["function"]["arguments"] == '{"command": "a"}'
    assert repairs[Repair.PARALLEL_CALL_DROPPED] == 1


def test_a_whole_completion_is_healed_and_coerced_but_not_when_cut():
    body = completion(("shell", "{'command': 'ls', 'timeout': '5',}"))
    options = UpstreamOptions(heal_arguments=True, coerce_arguments=True)
    fixed, repairs = whole(body, options, request())
    [call] = orjson.loads(fixed)["choices"][0]["message"]["tool_calls"]
    assert orjson.loads(call["function"]["arguments"]) == {"command": "ls", "timeout": 5}
    assert repairs[Repair.ARGS_HEALED] == repairs[Repair.ARGS_COERCED] == 1
    cut = completion(("shell", "{'command': 'ls',}"), finish="length")
    fixed, repairs = whole(cut, options, request())
    assert fixed is cut
    assert Repair.ARGS_HEALED not in repairs
