"""Issue 24 item 1 in the core: one finish per choice, at its real end, after all its calls
(chat/early_finish.py). A ``tool_calls`` finish waits for the choice's next event; a later
call, text or finish makes it early (``finish-early``), the stream's end keeps it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from proxy.core.options import RequestInfo
from proxy.core.repairs import Repair
from proxy.core.sse import DONE
from tests.support.normalizer import eventwise, run
from tests.support.strict_checker import check, chunks, reconstruct

FIELD = Path(__file__).parents[3] / "fixtures" / "field"
TOOLS = RequestInfo(tools=[{"type": "function", "function": {"name": "add", "parameters": {}}}])
ENVELOPE = {"id": "chatcmpl-e", "object": "chat.completion.chunk", "created": 1, "model": "m"}


def chunk(delta: Any = None, finish: Any = None, **top: Any) -> bytes:
    choice = {"index": 0, "delta": {} if delta is None else delta, "finish_reason": finish}
    return b"data: " + json.dumps({**ENVELOPE, "choices": [choice], **top}).encode() + b"\n\n"


def whole_call(n: int) -> dict[str, Any]:
    args = json.dumps({"a": n})
    entry = {"index": n, "id": f"c{n}", "type": "function"}
    return {"tool_calls": [{**entry, "function": {"name": "add", "arguments": args}}]}


def finishes(output: bytes) -> list[tuple[int, Any]]:
    """(position among the choice chunks, finish) of every finish the client sees."""
    choice_chunks = [c for c in chunks(output) if isinstance(c, dict) and c.get("choices")]
    return [
        (at, c["choices"][0]["finish_reason"])
        for at, c in enumerate(choice_chunks)
        if c["choices"][0].get("finish_reason") is not None
    ] + [(len(choice_chunks), None)]


def test_kimi_finish_on_every_call_comes_out_once_after_the_last_call() -> None:
    body = (FIELD / "kimi-k2-finish-on-every-call.chat.sse").read_bytes()
    output, n = run(eventwise(body), request=TOOLS)
    assert check(output) == []
    seen = reconstruct(output).choices[0]
    assert [json.loads(c.text) for c in seen.calls] == [{"a": 1, "b": 2}, {"a": 2, "b": 3}]
    assert (seen.finishes, seen.finish_reason) == (1, "tool_calls")
    [(at, _), (end, _)] = finishes(output)
    assert at == end - 1  # the last chunk of the choice
    assert n.repairs[Repair.FINISH_EARLY] == 1


def test_glm_finish_twice_keeps_the_last_with_its_usage() -> None:
    body = (FIELD / "glm-4.6-finish-twice-call-between.chat.sse").read_bytes()
    output, n = run(eventwise(body), request=TOOLS)
    assert check(output) == []
    seen = reconstruct(output).choices[0]
    assert [c.id for c in seen.calls] == ["call_glm0", "call_glm1"]
    assert seen.finishes == 1
    assert n.repairs[Repair.FINISH_EARLY] == 1
    last = [c for c in chunks(output) if isinstance(c, dict)][-1]
    assert last["choices"][0]["finish_reason"] == "tool_calls"
    assert last["usage"] == {"prompt_tokens": 88, "completion_tokens": 41, "total_tokens": 129}


def test_usage_on_an_early_finish_stays_in_its_chunk() -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    body = b"".join(
        [
            chunk({"role": "assistant", **whole_call(0)}),
            chunk({}, "tool_calls", usage=usage, system_fingerprint="fp"),
            chunk(whole_call(1)),
            chunk({}, "tool_calls"),
            DONE,
        ]
    )
    output, n = run(eventwise(body), request=TOOLS)
    assert check(output) == []
    assert reconstruct(output).choices[0].finishes == 1
    parsed = [c for c in chunks(output) if isinstance(c, dict)]
    [carrier] = [c for c in parsed if c.get("usage")]
    assert carrier["usage"] == usage
    assert carrier["system_fingerprint"] == "fp"
    assert carrier["choices"][0]["finish_reason"] is None
    assert parsed.index(carrier) < next(i for i, c in enumerate(parsed) if "c1" in json.dumps(c))
    assert n.repairs[Repair.FINISH_EARLY] == 1


def test_text_after_a_tool_calls_finish_makes_it_early() -> None:
    body = b"".join([chunk(whole_call(0), "tool_calls"), chunk({"content": "done"}), DONE])
    output, n = run(eventwise(body), request=TOOLS)
    assert check(output) == []
    seen = reconstruct(output).choices[0]
    assert "".join(seen.content) == "done"
    assert (seen.finishes, seen.finish_reason) == (1, "tool_calls")
    [(at, _), (end, _)] = finishes(output)
    assert at == end - 1
    assert n.repairs[Repair.FINISH_EARLY] == 1


def test_a_call_after_the_finish_and_no_finish_again_ends_with_one() -> None:
    body = b"".join([chunk(whole_call(0), "tool_calls"), chunk(whole_call(1)), DONE])
    output, n = run(eventwise(body), request=TOOLS)
    assert check(output) == []
    seen = reconstruct(output).choices[0]
    assert (len(seen.calls), seen.finishes, seen.finish_reason) == (2, 1, "tool_calls")
    assert n.repairs[Repair.FINISH_EARLY] == 1


def test_a_canonical_stream_with_one_finish_passes_byte_for_byte() -> None:
    body = b"".join(
        [
            chunk({"role": "assistant", **whole_call(0)}),
            chunk({}, "tool_calls"),
            b'data: {"id":"chatcmpl-e","object":"chat.completion.chunk","created":1,'
            b'"model":"m","choices":[],"usage":{"total_tokens":3}}\n\n',
            DONE,
        ]
    )
    for reads in (eventwise(body), [body]):
        output, n = run(reads, request=TOOLS)
        assert output == body
        assert n.repairs[Repair.FINISH_EARLY] == 0


@given(
    st.lists(
        st.tuples(st.booleans(), st.integers(min_value=0, max_value=2)), min_size=1, max_size=6
    ),
    st.booleans(),
)
def test_any_number_of_early_finishes_leaves_one_at_the_end(
    plan: list[tuple[bool, int]], done: bool
) -> None:
    # each call whole in a chunk, with or without a finish on it, then 0-2 finish chunks
    parts = [chunk({"role": "assistant", "content": ""})]
    for n, (on_call, after) in enumerate(plan):
        parts.append(chunk(whole_call(n), "tool_calls" if on_call else None))
        parts += [chunk({}, "tool_calls")] * after
    if done:
        parts.append(DONE)
    output, _ = run(eventwise(b"".join(parts)), request=TOOLS)
    assert check(output) == []
    seen = reconstruct(output).choices[0]
    assert [json.loads(c.text) for c in seen.calls] == [{"a": n} for n in range(len(plan))]
    assert (seen.finishes, seen.finish_reason) == (1, "tool_calls")
    [(at, _), (end, _)] = finishes(output)
    assert at == end - 1
