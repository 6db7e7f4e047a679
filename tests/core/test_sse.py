"""SSE codec: every framing case, run whole, one byte at a time and at random cut points."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from proxy.core.sse import (
    DONE,
    Event,
    RawBytes,
    SSEDecoder,
    done_in,
    encode_event,
    plain_data,
    plain_datas,
    slices,
)


def decode(chunks: Iterable[bytes], *, max_event_bytes: int = 1 << 20) -> list[Event | RawBytes]:
    decoder = SSEDecoder(max_event_bytes=max_event_bytes)
    out: list[Event | RawBytes] = []
    for chunk in chunks:
        out += decoder.feed(chunk)
    out += decoder.close()
    return out


def cut(data: bytes, points: Sequence[int]) -> list[bytes]:
    edges = [0, *sorted({p % (len(data) + 1) for p in points}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def ways(data: bytes) -> dict[str, list[bytes]]:
    return {
        "whole": [data],
        "bytewise": [data[i : i + 1] for i in range(len(data))],
        "halves": cut(data, [len(data) // 2]),
    }


# (id, input bytes, expected (data, event, id, retry, fields) per event; None marks RawBytes)
CASES: list[tuple[str, bytes, list[tuple[bytes | None, str | None, str | None]]]] = [
    ("lf", b"data: a\n\ndata: b\n\n", [(b"a", None, None), (b"b", None, None)]),
    ("crlf", b"data: a\r\n\r\ndata: b\r\n\r\n", [(b"a", None, None), (b"b", None, None)]),
    ("cr", b"data: a\r\rdata: b\r\r", [(b"a", None, None), (b"b", None, None)]),
    ("mixed_endings", b"data: a\r\ndata: b\n\r", [(b"a\nb", None, None)]),
    ("multiline_data", b'data: {"a":\ndata: 1}\n\n', [(b'{"a":\n1}', None, None)]),
    ("no_space_after_colon", b"data:x\n\n", [(b"x", None, None)]),
    ("two_spaces_keeps_one", b"data:  x\n\n", [(b" x", None, None)]),
    ("empty_data", b"data:\n\n", [(b"", None, None)]),
    ("field_without_colon", b"data\n\n", [(b"", None, None)]),
    ("comment_only", b": keep-alive\n\n", [(None, None, None)]),
    ("comment_and_data", b": OPENROUTER PROCESSING\ndata: x\n\n", [(b"x", None, None)]),
    ("event_and_id", b"event: ping\nid: 7\ndata: x\n\n", [(b"x", "ping", "7")]),
    ("stray_blank_line", b"\ndata: x\n\n", [(None, None, None), (b"x", None, None)]),
    ("done", b"data: [DONE]\n\n", [(b"[DONE]", None, None)]),
    (
        "utf8_multibyte",
        "data: \u00e9\u4e2d\U0001f600\n\n".encode(),
        [("\u00e9\u4e2d\U0001f600".encode(), None, None)],
    ),
    ("bom_at_start", b"\xef\xbb\xbfdata: x\n\n", [(b"x", None, None)]),
    ("unterminated_tail", b"data: a\n\ndata: b", [(b"a", None, None), (None, None, None)]),
    ("unterminated_line_end", b"data: a\n\ndata: b\n", [(b"a", None, None), (None, None, None)]),
    ("trailing_cr_at_eof_ends_line", b"data: a\r\r", [(b"a", None, None)]),
]


@pytest.mark.parametrize(("data", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("way", ["whole", "bytewise", "halves"])
def test_decoder_framing_table(
    way: str, data: bytes, expected: list[tuple[bytes | None, str | None, str | None]]
) -> None:
    events = decode(ways(data)[way])
    assert b"".join(e.raw for e in events) == data
    got = [(e.data, e.event, e.id) if isinstance(e, Event) else (None, None, None) for e in events]
    assert got == expected


def test_decoder_unterminated_tail_comes_back_raw() -> None:
    events = decode([b"data: a\n\ndata: b"])
    assert isinstance(events[-1], RawBytes)
    assert events[-1].reason == "unterminated"
    assert events[-1].raw == b"data: b"


def test_decoder_crlf_split_across_reads_is_one_line_end() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\r") == []
    events = decoder.feed(b"\n\r\n")
    assert len(events) == 1
    assert isinstance(events[0], Event)
    assert events[0].data == b"a"
    assert events[0].raw == b"data: a\r\n\r\n"


def test_decoder_returns_event_as_soon_as_its_blank_line_arrives() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"data: a\n") == []
    assert [e.raw for e in decoder.feed(b"\n")] == [b"data: a\n\n"]


def test_decoder_keeps_unknown_fields_such_as_llamacpp_error() -> None:
    line = b'error: {"code":400,"message":"too long"}\n\n'
    [event] = decode([line])
    assert isinstance(event, Event)
    assert event.data is None
    assert event.fields == (("error", '{"code":400,"message":"too long"}'),)


def test_decoder_retry_only_when_digits() -> None:
    [good, bad] = decode([b"retry: 3000\ndata: x\n\nretry: 3s\ndata: y\n\n"])
    assert isinstance(good, Event)
    assert isinstance(bad, Event)
    assert (good.retry, bad.retry) == (3000, None)


def test_decoder_id_with_nul_is_ignored() -> None:
    [event] = decode([b"id: a\x00b\ndata: x\n\n"])
    assert isinstance(event, Event)
    assert event.id is None


def test_decoder_oversize_event_fails_open_and_passes_the_rest_raw() -> None:
    decoder = SSEDecoder(max_event_bytes=16)
    first = decoder.feed(b"data: ok\n\ndata: " + b"x" * 20)
    assert isinstance(first[0], Event)
    assert first[0].data == b"ok"
    assert first[1] == RawBytes(b"data: " + b"x" * 20, "oversize")
    assert decoder.passthrough
    assert decoder.feed(b"\n\ndata: y\n\n") == [RawBytes(b"\n\ndata: y\n\n", "oversize")]
    assert decoder.close() == []


def test_decoder_a_whole_event_over_the_cap_is_oversize_however_the_reads_are_cut() -> None:
    # the cap means the same whether the event came whole or in pieces (issue 26 item 2): one
    # that came whole is not parsed past it either, by the shortcut or by the line machine
    big = b"data: " + b"x" * 20 + b"\n\n"
    data = b"data: ok\n\n" + big + b"data: later\n\n"
    shortcut = [data[:10], data[10:]]  # not the first read: whole one-line events cut directly
    for reads in ([data], shortcut, [bytes([b]) for b in data]):
        events = decode(reads, max_event_bytes=16)
        assert isinstance(events[0], Event)
        assert events[0].data == b"ok"
        assert all(isinstance(e, RawBytes) and e.reason == "oversize" for e in events[1:])
        assert b"".join(e.raw for e in events[1:]) == data[10:]
    decoder = SSEDecoder(max_event_bytes=16)
    decoder.feed(b"data: ok\n\n")
    assert decoder.plain_events(b"data: a\n\n") == 1
    assert decoder.plain_events(b"data: a\n\n" * 2) == 0  # longer than the cap: decoded


def test_decoder_is_linear_on_a_long_line_fed_bytewise() -> None:
    decoder = SSEDecoder()
    line = b"data: " + b"x" * 50_000
    for i in range(len(line)):
        decoder.feed(line[i : i + 1])
    [event] = decoder.feed(b"\n\n")
    assert isinstance(event, Event)
    assert event.data is not None
    assert len(event.data) == 50_000


def test_encode_event_single_and_multiline() -> None:
    assert encode_event(b'{"a":1}') == b'data: {"a":1}\n\n'
    assert encode_event(b"a\nb", event="x") == b"event: x\ndata: a\ndata: b\n\n"
    assert DONE == b"data: [DONE]\n\n"


sse_lines = st.one_of(
    st.builds(
        lambda s: b"data: " + s.encode(),
        st.text(
            alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=["Cs"]),
            max_size=12,
        ),
    ),
    st.just(b": comment"),
    st.just(b"event: x"),
    st.just(b"id: 1"),
    st.just(b""),
)
endings = st.sampled_from([b"\n", b"\r\n", b"\r"])
streams = st.lists(st.tuples(sse_lines, endings), max_size=20).map(
    lambda parts: b"".join(line + end for line, end in parts)
)


@given(data=streams, points=st.lists(st.integers(min_value=0), max_size=12))
@example(data=b"data: a\r\n\r\n", points=[8])
@example(data=b"data: \xc3\xa9\n\n", points=[7])
def test_decoder_same_events_however_the_bytes_are_cut(data: bytes, points: list[int]) -> None:
    whole = decode([data])
    assert decode(cut(data, points)) == whole
    assert b"".join(e.raw for e in whole) == data


@given(data=st.binary(max_size=300), points=st.lists(st.integers(min_value=0), max_size=8))
def test_decoder_never_loses_or_invents_a_byte_on_arbitrary_input(
    data: bytes, points: list[int]
) -> None:
    events = decode(cut(data, points), max_event_bytes=64)
    assert b"".join(e.raw for e in events) == data


@given(payload=st.binary(max_size=200).filter(lambda b: b"\r" not in b))
def test_encode_then_decode_round_trips(payload: bytes) -> None:
    [event] = decode([encode_event(payload)])
    assert isinstance(event, Event)
    assert event.data == payload


lf_streams = st.lists(sse_lines, max_size=20).map(
    lambda lines: b"".join(line + b"\n" for line in lines)
)


@given(data=st.one_of(streams, lf_streams), points=st.lists(st.integers(min_value=0), max_size=6))
@example(data=b"data: a\n\ndata: b\ndata: c\n\n: x\n\ndata: d\n\ndata: e", points=[])
@example(data=b"data: a\n\n\ndata: b\n\ndata:c\n\n", points=[])
def test_decoder_whole_data_events_come_out_as_the_line_machine_makes_them(
    data: bytes, points: list[int]
) -> None:
    # Reads that start a new event take the shortcut for whole one-line data events; byte by
    # byte no read ever holds a whole event, so there the line machine does everything.
    head = b"data: first\n\n"
    shortcut = decode([head, *cut(data, points)])
    line_by_line = decode(bytes([b]) for b in head + data)
    assert shortcut == line_by_line


@given(data=st.one_of(streams, lf_streams), points=st.lists(st.integers(min_value=0), max_size=6))
@example(data=b"data: a\n\n\n\ndata: b\n\n", points=[])
@example(data=b"data: a\n\n: x\n\n", points=[])
@example(data=b"data: a\ndata: b\n\n\n\n", points=[])
def test_plain_events_counts_a_read_only_when_it_is_whole_one_line_data_events(
    data: bytes, points: list[int]
) -> None:
    # The rewriter forwards a read whole, unfed, on this count; it must never take a read the
    # decoder would see as anything else, nor one that would change the decoder's state.
    decoder = SSEDecoder()
    decoder.feed(b"data: first\n\n")
    for read in cut(data, points):
        count = decoder.plain_events(read)
        events = decoder.feed(read)
        if count:
            assert len(events) == count
            assert all(
                isinstance(e, Event)
                and e.raw == b"data: " + (e.data or b"") + b"\n\n"
                and e.event is None
                and e.id is None
                and e.retry is None
                and not e.fields
                for e in events
            )
            assert b"".join(e.raw for e in events) == read
            assert decoder.plain_events(b"data: x\n\n") == 1  # nothing left pending


def test_plain_events_refuses_a_first_read_with_a_bom_a_pending_event_and_other_framings() -> None:
    # issue 29 ("the first events of a stream"): a first read that begins with its data line
    # has no byte order mark, and is plain like any other (it was refused until then); one
    # that begins with the mark is the decoder's to strip
    assert SSEDecoder().plain_events(b"\xef\xbb\xbfdata: a\n\n") == 0
    decoder = SSEDecoder()
    assert decoder.plain_events(b"data: a\n\n") == 1
    # the stream began: a mark now is no mark but a field name, as if the read had been fed
    [event] = decoder.feed(b"\xef\xbb\xbfdata: a\n\n")
    assert isinstance(event, Event)
    assert event.data is None
    assert decoder.plain_events(b"data: a\n\ndata: b\n\n") == 2
    for other in (b"data: a\r\n\r\n", b"data:a\n\n", b": c\n\n", b"event: e\ndata: a\n\n"):
        assert decoder.plain_events(other) == 0, other
    decoder.feed(b"data: par")
    assert decoder.plain_events(b"data: a\n\n") == 0


@given(
    st.lists(
        st.sampled_from([b"data: x\n\n", b"data: " + b"y" * 40 + b"\n\n", b"data: a\r\n\r\n"]),
        max_size=40,
    ),
    st.integers(1, 120),
)
@example([b"data: " + b"z" * 300 + b"\r\n\r\n"], 10)  # no blank line of LFs: cut at a line end
def test_slices_of_a_read_end_where_events_do_and_decode_as_the_read_does(
    events: list[bytes], size: int
) -> None:
    data = b"".join(events)
    parts = slices(data, size)
    assert b"".join(parts) == data
    for part in parts[:-1]:
        assert len(part) > size
        assert part.endswith(b"\n\n") or (part.endswith(b"\n") and b"\n\n" not in part[size:])
    assert decode(parts) == decode([data])


def test_a_read_no_longer_than_a_slice_is_not_copied() -> None:
    data = b"data: x\n\n" * 10
    [part] = slices(data, len(data))
    assert part is data


# -- whole plain events and the rest, in one call (the whole-read fast path asks this) -------


def _pending(start: bytes) -> SSEDecoder:
    decoder = SSEDecoder()
    decoder.feed(b"data: first\n\n")  # not at the stream's start, where a BOM may be
    assert decoder.feed(start) == []
    return decoder


def test_the_end_of_an_event_begun_in_an_earlier_read_is_decoded_first():
    decoder = _pending(b"da")
    decoded, plain, count, rest = decoder.whole_events(b'ta: {"a": 1}\n\ndata: x\n\n')
    assert [e.raw for e in decoded] == [b'data: {"a": 1}\n\n']
    assert (plain, count, rest) == (b"data: x\n\n", 1, b"")
    decoder = _pending(b"da")
    assert decoder.whole_events(b'ta: {"a": 1}\n') == ([], b"", 0, b"")  # still pending
    assert decoder.pending
    decoder = _pending(b"data: a")
    decoded, plain, count, rest = decoder.whole_events(b"\n\n")
    assert [e.raw for e in decoded] == [b"data: a\n\n"]
    assert (plain, count, rest) == (b"", 0, b"")


def test_a_read_is_cut_after_its_last_whole_event():
    decoder = _pending(b"")
    read = b"data: a\n\ndata: b\n\ndata: c"
    assert decoder.whole_events(read) == ((), b"data: a\n\ndata: b\n\n", 2, b"data: c")
    whole = b"data: a\n\n"
    decoded, plain, count, rest = decoder.whole_events(whole)
    assert (decoded, count, rest) == ((), 1, b"")
    assert plain is whole  # the very bytes object: forwarded as it came
    assert decoder.whole_events(b"data: a\n") == ((), b"", 0, b"data: a\n")


def test_events_of_another_framing_are_the_rest_and_a_first_read_with_a_bom_is_never_plain():
    # issue 29 ("the first events of a stream"): a first read without the mark is plain (it
    # was never plain until then, in case a mark came first)
    read = b"data: a\n\n"
    assert SSEDecoder().whole_events(read) == ((), read, 1, b"")
    marked = b"\xef\xbb\xbf" + read
    assert SSEDecoder().whole_events(marked) == ((), b"", 0, marked)
    decoder = _pending(b"")
    framed = b"event: e\ndata: a\n\ndata: b\n\n"
    assert decoder.whole_events(framed) == ((), b"", 0, framed)


@given(data=st.one_of(streams, lf_streams), points=st.lists(st.integers(min_value=0), max_size=8))
@example(data=b"data: a\n\ndata: b\n\n", points=[3, 12])
def test_whole_events_then_plain_then_rest_decode_as_the_reads_do(
    data: bytes, points: list[int]
) -> None:
    """However the stream is cut: the decoded events, then the plain events fed (``count``
    of them, each one line of data), then the rest fed, are the events ``feed`` gives."""
    decoder = SSEDecoder()
    got: list[Event | RawBytes] = []
    for read in cut(data, points):
        decoded, plain, count, rest = decoder.whole_events(read)
        assert read.endswith(plain + rest)  # what comes back unfed is the read's own tail
        got += decoded
        if count:
            events = decoder.feed(plain)
            assert len(events) == count
            assert all(
                isinstance(e, Event) and e.raw == b"data: " + (e.data or b"") + b"\n\n"
                for e in events
            )
            got += events
        else:
            assert plain == b""
        got += decoder.feed(rest)
    got += decoder.close()
    assert got == decode([data])


def test_the_data_of_plain_events_is_what_the_decoder_reads():
    read = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    decoder = SSEDecoder()
    decoder.feed(b"data: first\n\n")  # not at the stream's start, where a BOM may be
    assert decoder.plain_events(read) == 3
    events = SSEDecoder().feed(read)
    assert plain_datas(read) == [e.data for e in events if isinstance(e, Event)]
    one = b'data: {"a": 1}\n\n'
    assert plain_data(one) == b'{"a": 1}' == plain_datas(one)[0]


def test_done_is_looked_for_where_each_event_of_a_plain_read_starts() -> None:
    text = b'data: {"choices":[{"delta":{"content":"[DONE]"}}]}\n\n'
    assert done_in(b"data: [DONE]\n\n", 1)
    assert not done_in(text, 1)  # only text that says it
    assert done_in(text + b"data: [DONE]\n\n", 2)
    assert not done_in(text + text, 2)
