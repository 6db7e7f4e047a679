"""The rewriter's fast paths: reads and text that need nothing skip the work, and only those."""

from __future__ import annotations

import orjson
import pytest

from proxy.dialects import check_names
from proxy.dialects.extractor import MarkupExtractor
from proxy.normalize import NormalizeOptions, RequestInfo, StreamNormalizer
from proxy.rewriter import SSERewriter
from tests.normalize_helpers import counting_ids

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
    body = {
        "id": "c1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return b"data: " + orjson.dumps(body) + b"\n\n"


def rewriter(*, tools: bool) -> SSERewriter:
    normalizer = StreamNormalizer(
        NormalizeOptions(dialects=check_names(["auto"])),
        RequestInfo(tools=TOOLS if tools else []),
        new_id=counting_ids(),
    )
    return SSERewriter(normalizer, max_event_bytes=1 << 20)


def test_a_read_of_plain_events_goes_out_as_the_same_bytes_object() -> None:
    r = rewriter(tools=False)
    r.feed(chunk({"role": "assistant", "content": ""}))
    read = chunk({"content": "Hello"}) + chunk({"content": " world"})
    [out] = r.feed(read)
    assert out is read  # not parsed, not even cut into events


@pytest.mark.parametrize(
    "read",
    [
        chunk({"content": "x"}, "eos_token"),  # a finish reason to correct (Q24)
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
        b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n',  # no object (openai-python)
        b'data: {"object":"chat.completion.chunk","choices":[{"index":0}]}\n\n',  # no delta (Q29)
        b'data: {"error":{"message":"boom"}}\n\n',
        b"data: [DONE]\n\n",
    ],
)
def test_a_read_that_may_need_work_is_decoded(read: bytes) -> None:
    head = chunk({"role": "assistant", "content": ""})
    whole, by_event = rewriter(tools=False), rewriter(tools=False)
    whole.feed(head)
    by_event.feed(head)
    combined = chunk({"content": "a"}) + read
    out = whole.feed(combined)
    assert not any(piece is combined for piece in out)  # it did not take the fast path
    expected = by_event.feed(chunk({"content": "a"})) + by_event.feed(read)
    assert b"".join(out) == b"".join(expected)


def test_the_done_event_inside_a_plain_read_still_ends_the_stream_once() -> None:
    r = rewriter(tools=False)
    r.feed(chunk({"role": "assistant", "content": ""}))
    out = b"".join(r.feed(chunk({"content": "a"}, "stop") + b"data: [DONE]\n\n"))
    out += b"".join(r.close(complete=True))
    assert out.count(b"[DONE]") == 1


def test_text_without_markup_does_not_reach_the_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    fed: list[str] = []
    real_feed = MarkupExtractor.feed

    def spy(self: MarkupExtractor, text: str) -> list[object]:
        fed.append(text)
        return real_feed(self, text)  # type: ignore[return-value]

    monkeypatch.setattr(MarkupExtractor, "feed", spy)
    r = rewriter(tools=True)
    r.feed(chunk({"role": "assistant", "content": ""}))
    r.feed(chunk({"content": "The"}))  # the start of the content: markup may open here
    plain = [chunk({"content": t}) for t in (" weather", " is", " fine", "!")]
    out = [r.feed(e) for e in plain]
    assert out == [[e] for e in plain]
    assert fed == ["The"]
    # text that may open markup is fed, and held back until it is known not to
    held = r.feed(chunk({"content": " <tool"}))
    assert fed[-1] == " <tool"
    assert b"<tool" not in b"".join(held)
    assert b"<tool" in b"".join(r.feed(chunk({"content": "box> here"})))
