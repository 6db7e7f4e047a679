"""Properties of the streaming normalizer over generated and mutated streams (hypothesis).

Shrunk failures are pinned below each property as ``@example``.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo
from proxy.core.repairs import DETECTED_ONLY
from tests.support.mutations import GOLDEN_INPUTS, argument_and_text_chars, mutated
from tests.support.normalizer import cut, run
from tests.support.stream_strategies import CANONICAL, Call, Choice, Drawn, streams, text_streams
from tests.support.strict_checker import check, reconstruct

TGI_GRAMMAR = (
    Path(__file__).parents[3]
    / "fixtures"
    / "field"
    / "tgi-2.4-grammar-object-name-in-args.chat.sse"
).read_bytes()

FORMS = ["S1", "S2"]
# NORMALIZER_EXAMPLES=5000 runs a deep pass (the default keeps the suite quick)
EXAMPLES = int(os.environ.get("NORMALIZER_EXAMPLES", "150"))
PROPERTY = settings(
    max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def sse(*choices: dict[str, Any]) -> bytes:
    """One chunk per choice object, in a fixed envelope (for the pinned examples)."""
    envelope = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    return b"".join(
        b"data: "
        + json.dumps({**envelope, "choices": [c]}, separators=(",", ":")).encode()
        + b"\n\n"
        for c in choices
    )


def choice(delta: dict[str, Any], finish: str | None = None, index: int = 0) -> dict[str, Any]:
    return {"index": index, "delta": delta, "finish_reason": finish}


def opening(index: int, name: str, args: str = "", **entry: Any) -> dict[str, Any]:
    function = {"name": name, "arguments": args}
    return {"tool_calls": [{"index": index, **entry, "function": function}]}


def fragment(index: int, text: str) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": text}}]}


# Shrunk failures, pinned. S2 once sent a complete call before an earlier one still open:
S2_ORDER = Drawn(
    sse(
        choice({"role": "assistant", "content": None}),
        choice(opening(0, "get_weather", type="function")),
        choice(opening(1, "get_time", type="function")),
        choice(fragment(1, "{}")),
        choice({}, "tool_calls"),
    ),
    [
        Choice(
            0, [], [], [Call("get_weather", None, ""), Call("get_time", None, "{}")], "tool_calls"
        )
    ],
    {**CANONICAL, "done": False},
)
# A held {} call split from its delta's role, and let another choice's chunk overtake it:
HELD_WITH_ROLE = sse(
    choice({"role": "assistant", "content": None}),
    choice({"role": "assistant", **opening(0, "get_weather", type="function")}, "tool_calls"),
)
HELD_OVERTAKEN = sse(
    choice({"role": "assistant", "content": None}, index=1),
    choice({"content": "0"}),
    choice(opening(0, "get_weather", "{}", type="function"), index=1),
    choice(opening(1, "get_weather", "{}", type="function"), index=1),
    choice({}, "stop"),
    choice({}, "tool_calls", index=1),
)
NAMELESS_WITH_ROLE = sse(
    choice({"role": "assistant", **opening(0, "", type="function")}),
    choice({"role": "assistant", **opening(0, "get_weather", "{}")}, "tool_calls"),
)


def normalize(body: bytes | list[bytes], form: str, *, complete: bool = True):
    return run(
        body,
        options=UpstreamOptions(coalesce=form == "S2"),
        request=RequestInfo(),
        complete=complete,
    )


def assert_client_sees(drawn: Drawn, out: bytes) -> None:
    seen = reconstruct(out)
    for choice in drawn.choices:
        got = seen.choices[choice.index]
        assert "".join(got.content) == "".join(choice.content)
        assert "".join(got.reasoning) == "".join(choice.reasoning)
        assert got.finish_reason == choice.finish
        assert [c.name for c in got.calls] == [c.name for c in choice.calls]
        for have, want in zip(got.calls, choice.calls, strict=True):
            if want.id is not None:
                assert have.id == want.id
            if not want.args:
                assert have.text == "{}"
            elif drawn.shape["args_object"] and drawn.shape["first_args"] == "whole":
                assert json.loads(have.text) == json.loads(want.args)  # Q19: by value
            else:
                assert have.text == want.args  # every byte, nothing added


@PROPERTY
@given(streams(), st.sampled_from(FORMS))
@example(S2_ORDER, "S2")
def test_quirky_streams_come_out_canonical_with_every_argument_byte(drawn, form):
    out, normalizer = normalize(drawn.body, form)
    assert check(out, form=form) == []
    assert_client_sees(drawn, out)
    assert normalizer.dropped_arguments == []


@PROPERTY
@given(streams(), st.sampled_from(FORMS), st.lists(st.integers(0, 1 << 20), max_size=12))
def test_output_is_the_same_however_the_upstream_bytes_are_cut(drawn, form, points):
    whole, _ = normalize(drawn.body, form)
    assert normalize(cut(drawn.body, points), form)[0] == whole


@PROPERTY
@given(streams(), st.sampled_from(FORMS))
@example(Drawn(HELD_WITH_ROLE, []), "S2")
@example(Drawn(HELD_OVERTAKEN, []), "S1")
@example(Drawn(NAMELESS_WITH_ROLE, []), "S1")
def test_normalizing_twice_changes_nothing(drawn, form):
    once, _ = normalize(drawn.body, form)
    twice, normalizer = normalize(once, form)
    assert twice == once
    assert set(normalizer.repairs) <= DETECTED_ONLY


@PROPERTY
@given(streams(canonical=True))
def test_canonical_streams_pass_byte_for_byte(drawn):
    out, normalizer = normalize(drawn.body, "S1")
    assert out == drawn.body
    assert set(normalizer.repairs) <= DETECTED_ONLY
    if drawn.shape["first_args"] == "whole":  # each call whole in one delta is S2 as well
        assert normalize(drawn.body, "S2")[0] == drawn.body


@PROPERTY
@given(text_streams(), st.sampled_from(FORMS), st.lists(st.integers(0, 1 << 20), max_size=6))
def test_streams_without_tool_calls_pass_byte_for_byte(body, form, points):
    out, normalizer = normalize(cut(body, points), form)
    assert out == body
    assert not normalizer.repairs


# -- mutations: nothing escapes, no argument byte is lost -----------------------------------------


@settings(max_examples=3 * EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mutated(), st.sampled_from(FORMS), st.booleans(), st.lists(st.integers(0, 1 << 20), max_size=8)
)
# TGI's grammar call (issue 24 item 2): its wrapper and end-of-sequence token are not sent, so
# they must be reported (hypothesis found it once; it stays asked)
@example(TGI_GRAMMAR, "S1", False, [])
def test_mutated_streams_raise_nothing_and_lose_no_argument_byte(body, form, complete, points):
    out, normalizer = normalize(cut(body, points), form, complete=complete)
    args_in, text_in = argument_and_text_chars(body)
    args_out, text_out = argument_and_text_chars(out)
    assert not (args_in - args_out) - Counter("".join(normalizer.dropped_arguments))
    assert set(args_out - args_in) <= {"{", "}"}  # only the "{}" of a call without arguments
    assert text_out == text_in


@pytest.mark.parametrize("path", GOLDEN_INPUTS, ids=[p.name for p in GOLDEN_INPUTS])
def test_every_truncation_of_a_golden_input_raises_nothing(path):
    body = path.read_bytes()
    for end in range(0, len(body), max(1, len(body) // 64)):
        for complete in (True, False):
            normalize(body[:end], "S1", complete=complete)
