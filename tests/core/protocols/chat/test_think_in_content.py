"""``think_in_content`` (issue 24 item 11): a leading ``<think>...</think>`` in the content of
a server without a reasoning parser is reasoning when the upstream says so, in chat (S1, S2)
and both translate modes; off, the default, it stays text (tests/fixtures/field, the
``ollama-think-in-content`` stream, judged by the field report)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from proxy.core.options import RequestInfo, UpstreamOptions
from proxy.core.protocols.chat.completion import normalize_completion
from proxy.core.protocols.chat.normalize import StreamNormalizer
from proxy.core.protocols.chat.reasoning import LeadingThink
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.protocols.think import leading_think
from tests.fixtures.field import report
from tests.support.normalizer import counting_ids, eventwise

STREAM = next(s for s in report.load() if s.file == "ollama-think-in-content.chat.sse")
THINKING = dataclasses.replace(
    STREAM,
    expect={
        "finish": "stop",
        "reasoning": "\nThe user wants the weather.\n",
        "content": "\n\nIt is sunny in Paris.",
    },
)


@pytest.mark.parametrize("mode", STREAM.modes)
def test_with_the_option_the_leading_block_is_reasoning(
    mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = report.options

    def thinking(**extra: Any) -> UpstreamOptions:
        return dataclasses.replace(base(**extra), think_in_content=True)

    monkeypatch.setattr(report, "options", thinking)
    assert report.judge(THINKING, mode, report.run(THINKING, mode)) == []


@pytest.mark.parametrize("mode", STREAM.modes)
def test_without_it_the_block_stays_text(mode: str) -> None:
    assert report.judge(STREAM, mode, report.run(STREAM, mode)) == []


def split(pieces: list[str]) -> tuple[str, str]:
    think = LeadingThink()
    reasoning = content = ""
    for piece in pieces:
        r, c = think.feed(piece)
        reasoning, content = reasoning + r, content + c
    r, c = think.close()
    return reasoning + r, content + c


SPLITS = pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<think>a</think>b", ("a", "b")),
        ("  <think>a</thi", ("a</thi", "")),  # cut inside the block: reasoning as far as it got
        ("<thi", ("", "<thi")),  # never a block
        ("Hello <think>a</think>", ("", "Hello <think>a</think>")),  # not leading
        ("<think>a</think>b<think>c</think>", ("a", "b<think>c</think>")),  # only the first
    ],
)


@SPLITS
def test_a_leading_block_is_split_however_the_text_is_cut(
    text: str, expected: tuple[str, str]
) -> None:
    assert split([text]) == expected
    assert split(list(text)) == expected


@pytest.mark.parametrize("tools", [True, False], ids=["tools", "no-tools"])
def test_the_fast_paths_give_the_same_bytes(tools: bool) -> None:
    request = RequestInfo.from_body(report.chat_request(STREAM) if tools else {})

    def out(fast: bool) -> tuple[bytes, int]:
        options = UpstreamOptions(dialects=("hermes",), think_in_content=True)
        normalizer = StreamNormalizer(options, request, new_id=counting_ids(), fast=fast)
        sse = ChatSSEStream(normalizer)
        body = b"".join(b for read in eventwise(STREAM.body) for b in sse.feed(read))
        return body + b"".join(sse.close(complete=True)), normalizer.repairs["think-in-content"]

    fast, count = out(True)
    assert (fast, count) == out(False)
    assert count == 1
    assert report.read_chat(fast).reasoning == "\nThe user wants the weather.\n"


def _completion(content: str) -> bytes:
    message = {"role": "assistant", "content": content}
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return json.dumps({"id": "c", "object": "chat.completion", "choices": [choice]}).encode()


@pytest.mark.parametrize("field", ["keep", "reasoning_content", "reasoning"])
def test_a_whole_completions_leading_block_is_reasoning_under_the_option(field: str) -> None:
    # stream: false (issue 24 item 3b), as a stream's: the block's text under the field the
    # upstream's reasoning_field names (reasoning_content for keep), the rest the content
    body = _completion("<think>\nThe user wants the weather.\n</think>\n\nIt is sunny in Paris.")
    options = UpstreamOptions(think_in_content=True, reasoning_field=field)  # type: ignore[arg-type]
    out, repairs = normalize_completion(body, options, RequestInfo(), new_id=counting_ids())
    message = json.loads(out)["choices"][0]["message"]
    key = "reasoning_content" if field == "keep" else field
    assert message[key] == "\nThe user wants the weather.\n"
    assert message["content"] == "\n\nIt is sunny in Paris."
    assert repairs["think-in-content"] == 1
    # off (the default), or content that does not start with the block: as it came
    same, repairs = normalize_completion(
        body, UpstreamOptions(), RequestInfo(), new_id=counting_ids()
    )
    assert same == body
    assert not repairs
    late = _completion("Hello <think>a</think>")
    assert normalize_completion(late, options, RequestInfo(), new_id=counting_ids())[0] == late


@SPLITS
def test_a_whole_text_splits_as_a_stream_does(text: str, expected: tuple[str, str]) -> None:
    # the answers that are not streamed (protocols/think.py) take the stream's split
    found = leading_think(text)
    assert (found if found is not None else ("", text)) == expected
    assert (found is not None) == text.lstrip().startswith("<think>")
