"""Markup in text becomes tool calls (Q32): the normalizer's side of the dialects.

The dialect here is a test double (tests/toy_dialect.py); the real dialects are built on the
``dialects`` branch and their own tests check their grammars. What is checked here is how the
normalizer gates extraction, maps segments to deltas and fails open.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proxy.dialects.base import Text
from proxy.normalize import NormalizeOptions, RequestInfo, normalize_completion
from tests.normalize_helpers import counting_ids, cut, run
from tests.strict_checker import check, reconstruct
from tests.toy_dialect import ToyDialect, toy_dialect  # noqa: F401 (a fixture)

pytestmark = pytest.mark.usefixtures("toy_dialect")

ENVELOPE = {"id": "chatcmpl-d", "object": "chat.completion.chunk", "created": 1, "model": "m"}
TOOLS = {"tools": [{"type": "function", "function": {"name": "get_weather"}}]}
ON = NormalizeOptions(dialects=("toy",))


def stream(*texts: str, key: str = "content", finish: str = "stop", done: bool = True) -> bytes:
    out = [{"role": "assistant", "content": None}] + [{key: t} for t in texts]
    body = b"".join(
        b"data: "
        + json.dumps(
            {**ENVELOPE, "choices": [{"index": 0, "delta": d, "finish_reason": None}]}
        ).encode()
        + b"\n\n"
        for d in out
    )
    body += (
        b"data: "
        + json.dumps(
            {**ENVELOPE, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
        ).encode()
        + b"\n\n"
    )
    return body + (b"data: [DONE]\n\n" if done else b"")


TOKENS = [
    "Let me look.",
    " <ca",
    'll name="get_',
    'weather">{"loc',
    'ation": "Paris"}</c',
    "all>",
    " Done.",
]


def normalize(
    body: bytes | list[bytes],
    options: NormalizeOptions = ON,
    request: Any = TOOLS,
    complete: bool = True,
):
    return run(body, options=options, request=RequestInfo.from_body(request), complete=complete)


@pytest.mark.parametrize("form", ["S1", "S2"])
def test_markup_in_content_becomes_a_call_with_the_text_around_it_kept(form):
    options = NormalizeOptions(dialects=("toy",), coalesce=form == "S2")
    out, n = normalize(stream(*TOKENS), options)
    assert check(out, form=form) == []
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == "Let me look.  Done."
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert seen.calls[0].id == "call00001"
    assert seen.finish_reason == "tool_calls"
    assert n.repairs["markup-in-content:toy"] == 1
    assert n.repairs["finish-reason-stop"] == 1


def test_the_markup_id_is_kept():
    out, _ = normalize(stream('<call name="f" id="functions.f:0">{}</call>'))
    assert reconstruct(out).choices[0].calls[0].id == "functions.f:0"


@pytest.mark.parametrize(
    ("options", "request_body"),
    [
        (NormalizeOptions(), TOOLS),
        (ON, {}),
        (ON, {**TOOLS, "tool_choice": "none"}),
        (NormalizeOptions(dialects=("other",)), TOOLS),
    ],
    ids=["no dialects", "no tools", "tool_choice none", "no extractor"],
)
def test_text_stays_text_unless_extraction_applies(options, request_body):
    body = stream(*TOKENS)
    assert normalize(body, options, request_body)[0] == body


def test_text_without_markup_passes_byte_for_byte():
    body = stream("Hello", " <b>world</b>", " 1 < 2")
    assert normalize(body)[0] == body


def test_only_the_tail_that_could_begin_a_marker_is_held():
    body = stream("Hello <", "b> there")
    out, _ = normalize(body)
    contents = ["".join(c.content) for c in reconstruct(out).choices.values()]
    assert contents == ["Hello <b> there"]


def test_markup_cut_short_closes_the_call_with_what_arrived_and_records_it():
    out, n = normalize(stream('<call name="f">{"a": 1'))
    seen = reconstruct(out).choices[0]
    assert seen.calls[0].text == '{"a": 1'
    assert n.repairs["markup-broken"] == 1


def test_reasoning_is_searched_only_when_asked():
    body = stream('<call name="f">{}</call>', key="reasoning_content")
    assert normalize(body)[0] == body
    out, _ = normalize(body, NormalizeOptions(dialects=("toy",), extract_from_reasoning=True))
    assert [c.name for c in reconstruct(out).choices[0].calls] == ["f"]


def test_structured_calls_stop_the_extraction_and_release_held_text():
    structured = {
        "tool_calls": [
            {
                "index": 0,
                "id": "call_s",
                "type": "function",
                "function": {"name": "g", "arguments": "{}"},
            }
        ]
    }
    body = (
        b"data: "
        + json.dumps(
            {
                **ENVELOPE,
                "choices": [{"index": 0, "delta": {"content": "x <ca"}, "finish_reason": None}],
            }
        ).encode()
        + b"\n\n"
        + b"data: "
        + json.dumps(
            {**ENVELOPE, "choices": [{"index": 0, "delta": structured, "finish_reason": None}]}
        ).encode()
        + b"\n\n"
        + b"data: "
        + json.dumps(
            {
                **ENVELOPE,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"content": ' <call name="f">{}</call>'},
                        "finish_reason": "tool_calls",
                    }
                ],
            }
        ).encode()
        + b"\n\n"
    )
    out, _ = normalize(body)
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == 'x <ca <call name="f">{}</call>'
    assert [c.name for c in seen.calls] == ["g"]


def test_a_failing_dialect_gives_back_its_text_and_stops():
    out, n = normalize(stream("a <", "ca", "BOOM", '<call name="f">{}</call>'))
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == 'a <caBOOM<call name="f">{}</call>'
    assert seen.calls == []
    assert n.repairs["dialect-error"] == 1


def test_text_a_dialect_holds_counts_toward_the_cap():
    options = NormalizeOptions(dialects=("toy",), max_held_bytes=20)
    out, n = normalize(stream('<call name="f">{"a": "', "x" * 40, '"}</call>', "after"), options)
    assert n.repairs["cap-reached"] == 1
    seen = reconstruct(out).choices[0]
    assert seen.calls[0].text + "".join(seen.content) == '{"a": "' + "x" * 40 + '"}</call>after'


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2000), max_size=10))
def test_extraction_is_the_same_however_the_upstream_bytes_are_cut(points):
    body = stream(*TOKENS)
    assert normalize(cut(body, points))[0] == normalize(body)[0]


def test_markup_in_a_message_becomes_calls_when_not_streamed():
    message = {
        "role": "assistant",
        "content": 'Sure. <call name="get_weather">{"location": "Paris"}</call>',
    }
    body = json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    ).encode()
    out, repairs = normalize_completion(
        body, ON, RequestInfo.from_body(TOOLS), new_id=counting_ids()
    )
    choice = json.loads(out)["choices"][0]
    assert choice["message"]["content"] == "Sure. "
    assert choice["message"]["tool_calls"] == [
        {
            "id": "call00001",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location": "Paris"}'},
        }
    ]
    assert choice["finish_reason"] == "tool_calls"
    assert repairs["markup-in-content:toy"] == 1
    assert (
        normalize_completion(
            body, NormalizeOptions(), RequestInfo.from_body(TOOLS), new_id=counting_ids()
        )[0]
        == body
    )


def test_the_double_keeps_the_dialect_contract_for_plain_text():
    dialect = ToyDialect()
    assert dialect.feed("a < b") + dialect.close() == [Text("a < b")]
    assert dialect.feed("x <cal") == [Text("x ")]
    assert dialect.feed("m>") + dialect.close() == [Text("<calm>")]
