"""The rewriter's fast paths: reads and text that need nothing skip the work, and only those."""

from __future__ import annotations

import pytest

from proxy.core import markup
from proxy.core.jsonvalues import loads
from proxy.core.markup import check_names
from proxy.core.markup.extractor import MarkupExtractor
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat import normalize
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.sse import Event, RawBytes, SSEDecoder
from tests.support.normalizer import counting_ids
from tests.support.streams import chunk_event as chunk

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


def rewriter(*, tools: bool) -> ChatSSEStream:
    normalizer = StreamNormalizer(
        UpstreamOptions(dialects=check_names(["auto"])),
        RequestInfo(tools=TOOLS if tools else []),
        new_id=counting_ids(),
    )
    return ChatSSEStream(normalizer)


def test_a_read_of_plain_events_goes_out_as_the_same_bytes_object() -> None:
    r = rewriter(tools=False)
    r.feed(chunk({"role": "assistant", "content": ""}))
    read = chunk({"content": "Hello"}) + chunk({"content": " world"})
    [out] = r.feed(read)
    assert out is read  # not parsed, not even cut into events


@pytest.mark.parametrize(
    "read",
    [
        chunk({"content": "x"}, finish="eos_token"),  # a finish reason to correct (Q24)
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
    out = b"".join(r.feed(chunk({"content": "a"}, finish="stop") + b"data: [DONE]\n\n"))
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
    # issue 29: no text of these could open markup, so no extractor was built to be fed
    # (before, the content's start was fed to one: "The")
    assert fed == []
    # text that may open markup is fed, and held back until it is known not to
    held = r.feed(chunk({"content": " <tool"}))
    assert fed[-1] == " <tool"
    assert b"<tool" not in b"".join(held)
    assert b"<tool" in b"".join(r.feed(chunk({"content": "box> here"})))


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    parsed: list[bytes] = []

    def spy(data: bytes | str) -> object:
        parsed.append(data if isinstance(data, bytes) else data.encode())
        return loads(data)

    monkeypatch.setattr(normalize, "loads", spy)
    return parsed


@pytest.mark.parametrize("group", [1, 3])
def test_chunks_repeating_a_hot_chunks_shape_are_not_parsed(
    monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    parsed = count_parses(monkeypatch)
    r = rewriter(tools=True)
    r.feed(chunk({"role": "assistant", "content": ""}))
    r.feed(chunk({"content": "The"}))
    r.feed(chunk({"content": " sky"}))  # takes the hot path: its shape is remembered
    before = len(parsed)
    words = [chunk({"content": t}) for t in (" is", " blue", " and", " the", " sea", " too")]
    reads = [b"".join(words[i : i + group]) for i in range(0, len(words), group)]
    assert [r.feed(read) for read in reads] == [[read] for read in reads]
    assert len(parsed) == before
    # the same shape around text that may open markup is not passed: it reaches the extractor
    out = r.feed(chunk({"content": " <tool_call>"}))
    assert b"<tool_call>" not in b"".join(out)


@pytest.mark.parametrize("group", [1, 4])
def test_argument_fragments_repeating_a_hot_chunks_shape_keep_their_bookkeeping(
    monkeypatch: pytest.MonkeyPatch, group: int
) -> None:
    parsed = count_parses(monkeypatch)
    r = rewriter(tools=True)
    opening = {"index": 0, "id": "call_1", "type": "function"}
    r.feed(chunk({"role": "assistant", "content": None}))
    r.feed(chunk({"tool_calls": [{**opening, "function": {"name": "f", "arguments": ""}}]}))
    pieces = ['{"q"', ': "a', "b", "c", "d", '"}']
    events = [chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]}) for p in pieces]
    out = r.feed(events[0])  # the hot path, by parsing
    before = len(parsed)
    rest = events[1:]
    for i in range(0, len(rest), group):
        read = b"".join(rest[i : i + group])
        out += r.feed(read)
    assert len(parsed) == before
    # the arguments were kept: a re-sent copy of the whole (Q17) is still recognised
    out += r.feed(chunk({"tool_calls": [{"index": 0, "function": {"arguments": "".join(pieces)}}]}))
    out += r.feed(chunk({}, finish="tool_calls")) + r.close(complete=True)
    assert r.normalizer.repairs["args-duplicated-at-end"] == 1
    assert b"".join(out).count(b'\\"q\\"') == 1


def test_whole_events_between_two_cut_ones_are_not_decoded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    decoded: list[bytes] = []
    real = SSEDecoder.feed

    def spy(self: SSEDecoder, chunk: bytes) -> list[Event | RawBytes]:
        decoded.append(chunk)
        return real(self, chunk)

    monkeypatch.setattr(SSEDecoder, "feed", spy)
    r = rewriter(tools=False)
    r.feed(chunk({"role": "assistant", "content": ""}))
    a, b, c, d = (chunk({"content": t}) for t in ("one", " two", " three", " four"))
    out = r.feed(a[:20])  # an event begins
    out += r.feed(a[20:] + b + c + d[:15])  # ends it, two whole events, begins another
    out += r.feed(d[15:])
    assert b"".join(out) == a + b + c + d
    assert b + c in out  # the whole events in the middle went out as one piece
    assert all(b not in piece for piece in decoded[1:])


def count_builds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    built: list[tuple[str, ...]] = []
    real = markup.build_extractor

    def spy(names: tuple[str, ...], tools: object, *, begun: bool = False) -> object:
        built.append(tuple(names))
        return real(names, tools, begun=begun)  # type: ignore[arg-type]

    monkeypatch.setattr(markup, "build_extractor", spy)
    return built


def test_a_stream_of_plain_text_builds_no_extractor(monkeypatch: pytest.MonkeyPatch) -> None:
    # issue 29: the extractor (a dialect object each) is built at the first text that may
    # hold markup, not for every stream that offers tools
    built = count_builds(monkeypatch)
    r = rewriter(tools=True)
    events = [
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "\n"}),
        chunk({"content": "Hello there."}),
        chunk({"content": " It is fine."}),
        chunk({}, finish="stop"),
    ]
    out = [piece for event in events for piece in r.feed(event)] + r.close(complete=True)
    assert b"".join(out) == b"".join(events) + b"data: [DONE]\n\n"
    assert built == []
    # the first text that may open markup builds it
    r = rewriter(tools=True)
    r.feed(chunk({"role": "assistant", "content": ""}))
    r.feed(chunk({"content": "Hello"}))
    r.feed(chunk({"content": " <tool"}))
    assert len(built) == 1


def calls_of(texts: list[str]) -> tuple[int, bytes]:
    """The markup calls found in a stream of these content texts, and its output."""
    r = rewriter(tools=True)
    out = r.feed(chunk({"role": "assistant", "content": ""}))
    for text in texts:
        out += r.feed(chunk({"content": text}))
    out += r.feed(chunk({}, finish="stop")) + r.feed(b"data: [DONE]\n\n")
    out += r.close(complete=True)
    found = sum(n for kind, n in r.normalizer.repairs.items() if kind.startswith("markup-in"))
    return found, b"".join(out)


BARE = '{"name": "get_weather", "arguments": {"city": "Paris"}}'


@pytest.mark.parametrize(
    ("texts", "a_call"),
    [
        ([BARE], True),  # marker-less markup where the content starts
        (["\n", BARE], True),  # whitespace given out first: still the content's start
        (["Sure. ", BARE], False),  # past the start, only markers count
        (["Sure. ", "<tool_call>" + BARE + "</tool_call>"], True),
        (["<tool_", "call>" + BARE + "</tool_call>"], True),
    ],
)
def test_markup_after_text_given_out_unbuilt_is_judged_as_by_a_built_extractor(
    texts: list[str], a_call: bool
) -> None:
    found, out = calls_of(texts)
    assert (b'"tool_calls"' in out) is a_call
    assert found == (1 if a_call else 0)
