"""The streaming normalizer, event by event: when it holds and releases, how it ends a stream,
how it fails open, and what it records. Whole-stream cases are in test_golden.py."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from typing import Any

import pytest

import proxy.core.protocols.chat.normalize
from proxy.core.ids import IdPool
from proxy.core.jsonvalues import loads
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sent import chat_bytes
from proxy.core.sse import DONE, Event, RawBytes, SSEDecoder
from proxy.shell.random_ids import new_id_factory
from tests.support.normalizer import counting_ids, run
from tests.support.strict_checker import check, chunks, reconstruct

ENVELOPE = {"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1, "model": "m"}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}


def chunk(delta: Any = None, finish: Any = None, index: int = 0, **top: Any) -> bytes:
    choice: dict[str, Any] = {
        "index": index,
        "delta": {} if delta is None else delta,
        "finish_reason": finish,
    }
    return b"data: " + json.dumps({**ENVELOPE, "choices": [choice], **top}).encode() + b"\n\n"


def entry(
    index: Any = 0, ident: Any = None, name: Any = None, args: Any = None, **more: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {} if index is None else {"index": index}
    if ident is not None:
        out["id"] = ident
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    return {**out, **more, "function": function}


def calls(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"tool_calls": list(entries)}


def events(body: bytes) -> list[Event | RawBytes]:
    decoder = SSEDecoder()
    return decoder.feed(body) + decoder.close()


class Chat:
    """A normalizer's output as a chat client's stream writes it (chat/sent.py's writer)."""

    def __init__(self, normalizer: StreamNormalizer) -> None:
        self.normalizer = normalizer
        self.repairs = normalizer.repairs
        self.dropped_arguments = normalizer.dropped_arguments

    def feed(self, item: Event | RawBytes) -> list[bytes]:
        return chat_bytes(self.normalizer.feed(item))

    def close(self, *, complete: bool) -> list[bytes]:
        return chat_bytes(self.normalizer.close(complete=complete))


def normalizer(**options: Any) -> Chat:
    request = options.pop("request", RequestInfo())
    return Chat(StreamNormalizer(UpstreamOptions(**options), request, new_id=counting_ids()))


def feed_each(n: Chat, *bodies: bytes) -> list[list[bytes]]:
    """What each upstream event sends at once."""
    out = []
    for body in bodies:
        sent: list[bytes] = []
        for item in events(body):
            sent += n.feed(item)
        out.append(sent)
    return out


def parsed(sent: list[bytes]) -> list[Any]:
    return [json.loads(b[len(b"data: ") :]) if b != DONE else "[DONE]" for b in sent]


def deltas(sent: list[bytes]) -> list[Any]:
    return [c["choices"][0]["delta"] if c != "[DONE]" else c for c in parsed(sent)]


# -- the hot path ----------------------------------------------------------------------------------


def test_events_that_cannot_need_work_are_sent_without_parsing(monkeypatch):
    parses = []

    def spy(data):
        parses.append(data)
        return loads(data)

    monkeypatch.setattr(proxy.core.protocols.chat.normalize, "loads", spy)
    n = normalizer()
    body = chunk({"role": "assistant", "content": ""}) + chunk({"content": "Hi"}) + b": ping\n\n"
    assert feed_each(n, body) == [[e.raw for e in events(body)]]
    assert parses == []
    feed_each(n, chunk(calls(entry(0, "call_1", "f", "{}"))))
    assert len(parses) == 1


def test_a_finish_chunk_is_parsed_but_sent_as_its_bytes_when_nothing_changes():
    n = normalizer()
    body = chunk({}, "stop", usage={"total_tokens": 3})
    assert feed_each(n, body) == [[body]]


@pytest.mark.parametrize(
    "top",
    [{"object": None}, {"object": "text_completion"}, {"object": ""}],
    ids=["missing", "text_completion", "empty"],
)
def test_a_chunk_not_named_chat_completion_chunk_is_named_so(top):
    n = normalizer()
    fields = {k: v for k, v in top.items() if v is not None}
    body = b"".join(
        b"data: " + json.dumps({**ENVELOPE, **fields, "choices": choices}).encode() + b"\n\n"
        for choices in ([{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}], [])
    )
    if top["object"] is None:
        body = body.replace(b'"object": "chat.completion.chunk", ', b"")
    [sent] = feed_each(n, body)
    # A chunk without choices keeps an object it names (Azure's filter chunk says "").
    trailer = "chat.completion.chunk" if top["object"] is None else top["object"]
    assert [c["object"] for c in parsed(sent)] == ["chat.completion.chunk", trailer]
    assert [{**c, "object": None} for c in parsed(sent)] == [
        {**json.loads(e.data or b""), "object": None} for e in events(body) if isinstance(e, Event)
    ]
    assert n.repairs == {"object-missing": 2 if top["object"] is None else 1}


def test_a_choice_without_delta_gets_an_empty_one_and_keeps_its_fields():
    n = normalizer()
    annotation: dict[str, Any] = {"index": 0, "finish_reason": None}
    annotation["content_filter_results"] = {"hate": {}}
    [sent] = feed_each(n, chunk({"content": "Hi"}) + chunk(None, choices=[annotation]))
    assert parsed(sent)[1]["choices"] == [{**annotation, "delta": {}}]
    assert n.repairs == {"delta-missing": 1}


def test_chunks_that_name_themselves_right_are_not_parsed_however_spelled(monkeypatch):
    parses = []

    def spy(data):
        parses.append(data)
        return loads(data)

    monkeypatch.setattr(proxy.core.protocols.chat.normalize, "loads", spy)
    compact = chunk({"content": "Hi"}).replace(b'": ', b'":').replace(b", ", b",")
    spaced = compact.replace(b'"object":', b'"object" :\t')
    assert feed_each(normalizer(), compact + spaced) == [[compact, spaced]]
    assert parses == []


# -- holding and releasing -------------------------------------------------------------------------


def test_a_nameless_call_is_held_until_its_name_arrives_and_not_longer():
    n = normalizer()
    sent = feed_each(
        n,
        chunk(calls(entry(0, "call_1", "", ""))),
        chunk(calls(entry(0, None, None, '{"a":'))),
        chunk(calls(entry(0, None, "f", "1"))),
        chunk(calls(entry(0, None, None, "}"))),
    )
    assert sent[0] == sent[1] == []
    assert deltas(sent[2]) == [
        calls(
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
        ),
        calls({"index": 0, "function": {"arguments": '{"a":1'}}),
    ]
    assert deltas(sent[3]) == [calls({"index": 0, "function": {"arguments": "}"}})]
    assert n.repairs["name-after-args"] == 1


def test_a_placeholder_is_held_only_until_the_calls_next_event():
    n = normalizer()
    first, second = feed_each(
        n,
        chunk(calls(entry(0, "call_1", "f", "{}"))),
        chunk(calls(entry(0, None, None, '{"a":1}'))),
    )
    assert first == []
    assert deltas(second) == [
        calls(
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": ""},
            }
        ),
        calls({"index": 0, "function": {"arguments": '{"a":1}'}}),
    ]
    assert n.dropped_arguments == ["{}"]


def test_a_whole_call_with_empty_arguments_goes_out_as_it_came():
    n = normalizer()
    call = chunk(calls(entry(0, "call_1", "f", "{}", type="function")))
    finish = chunk({}, "tool_calls")
    # issue 24 item 1: a tool_calls finish waits for what follows it (a call after it would
    # make it early); [DONE] sends it as it came
    assert feed_each(n, call, finish, DONE) == [[], [call], [finish, DONE]]


def test_later_events_wait_behind_a_held_call_and_keep_their_order():
    n = normalizer()
    held = chunk(calls(entry(0, "call_1", "f", "{}", type="function")), index=1)
    other = chunk({"content": "text of choice 0"}, index=0)
    comment = b": keep-alive\n\n"
    sent = feed_each(n, held, other, comment, chunk({}, "tool_calls", index=1))
    assert sent[:3] == [[], [], []]
    assert sent[3][:3] == [held, other, comment]


def test_s2_sends_each_call_whole_as_soon_as_its_arguments_are_complete():
    n = normalizer(coalesce=True)
    sent = feed_each(
        n,
        chunk(calls(entry(0, "call_1", "f", ""))),
        chunk(calls(entry(0, None, None, '{"a":'))),
        chunk(calls(entry(0, None, None, "1}"))),
    )
    assert sent[:2] == [[], []]
    assert deltas(sent[2]) == [
        calls(
            {
                "index": 0,
                "id": "call_1",
                "type": "function",
                "function": {"name": "f", "arguments": '{"a":1}'},
            }
        )
    ]


def test_s2_never_sends_a_call_before_an_earlier_one():
    n = normalizer(coalesce=True)
    sent = feed_each(
        n,
        chunk(calls(entry(0, "call_1", "f", '{"a":'))),
        chunk(calls(entry(1, "call_2", "g", '{"b":2}'))),
        chunk(calls(entry(0, None, None, "1}"))),
    )
    assert sent[:2] == [[], []]
    assert [d["tool_calls"][0]["id"] for d in deltas(sent[2])] == ["call_1", "call_2"]


# -- ending a stream -------------------------------------------------------------------------------


def test_a_clean_end_adds_the_missing_finish_and_done():
    n = normalizer()
    feed_each(
        n, chunk(calls(entry(0, "call_1", "f", ""))), chunk(calls(entry(0, None, None, "{}")))
    )
    assert parsed(n.close(complete=True)) == [
        {**ENVELOPE, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
        "[DONE]",
    ]
    assert n.repairs["no-finish-chunk"] == n.repairs["missing-done"] == 1


def test_a_dropped_upstream_gets_what_is_held_and_nothing_invented():
    n = normalizer()
    assert feed_each(n, chunk(calls(entry(0, "call_1", None, '{"a":')))) == [[]]
    sent = n.close(complete=False)
    assert deltas(sent) == [
        calls({"index": 0, "id": "call_1", "type": "function", "function": {"arguments": ""}}),
        calls({"index": 0, "function": {"arguments": '{"a":'}}),
    ]
    assert n.close(complete=True) == []  # closing twice adds nothing


def test_a_call_whose_name_never_came_takes_the_only_tool_of_the_request():
    n = normalizer(request=RequestInfo.from_body({"tools": [WEATHER]}))
    feed_each(n, chunk(calls(entry(0, "call_1", None, "{}"))))
    sent = n.close(complete=True)
    assert deltas(sent)[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert check(b"".join(sent)) == []


def test_no_finish_and_no_done_are_invented_after_an_upstream_error():
    n = normalizer()
    feed_each(
        n, chunk(calls(entry(0, "call_1", "f", "{"))), b'data: {"error": {"message": "boom"}}\n\n'
    )
    assert parsed(n.close(complete=True)) == []
    assert "missing-done" not in n.repairs


def test_no_done_is_invented_after_a_llamacpp_error_line():
    out, n = run(chunk({"content": "Hel"}) + b'error: {"code": 500, "message": "boom"}\n\n')
    assert out.endswith(b'data: {"error":{"code":500,"message":"boom"}}\n\n')
    assert b"[DONE]" not in out
    assert "missing-done" not in n.repairs


def test_the_upstreams_own_done_after_an_error_passes_as_it_came():
    body = chunk({"content": "Hi"}) + b'data: {"error": {"message": "boom"}}\n\n' + DONE
    out, _ = run(body)
    assert out == body


CUT_CALL = chunk(calls(entry(0, "call_1", "f", ""))) + chunk(
    calls(entry(0, None, None, '{"city": "Par'))
)


@pytest.mark.parametrize("coalesce", [False, True], ids=["S1", "S2"])
def test_a_clean_end_inside_the_arguments_finishes_with_length(coalesce: bool):
    # no finish chunk, no [DONE]: the body just ended in the middle of the call's arguments
    out, n = run(CUT_CALL, options=UpstreamOptions(coalesce=coalesce))
    seen = reconstruct(out).choices[0]
    assert (seen.finish_reason, seen.calls[0].text) == ("length", '{"city": "Par')
    assert out.endswith(DONE)  # the end was clean: only the call was cut
    assert n.repairs["args-truncated"] == 1
    assert n.repairs["no-finish-chunk"] == n.repairs["missing-done"] == 1


@pytest.mark.parametrize("finish", ["stop", "eos_token"])
def test_a_stop_after_a_cut_call_becomes_length_not_tool_calls(finish: str):
    out, n = run(CUT_CALL + chunk({}, finish) + DONE)
    assert reconstruct(out).choices[0].finish_reason == "length"
    assert n.repairs["args-truncated"] == 1
    assert "finish-reason-stop" not in n.repairs


def test_the_upstreams_own_tool_calls_finish_stays_after_a_cut_call():
    out, n = run(CUT_CALL + chunk({}, "tool_calls") + DONE)
    assert reconstruct(out).choices[0].finish_reason == "tool_calls"
    assert n.repairs["args-not-json"] == 1
    assert "args-truncated" not in n.repairs


@pytest.mark.parametrize("end", [b"", chunk({}, "stop") + DONE], ids=["no-finish", "stop"])
def test_a_call_without_arguments_is_not_cut(end: bytes):
    out, n = run(chunk(calls(entry(0, "call_1", "f", ""))) + end)
    seen = reconstruct(out).choices[0]
    assert (seen.finish_reason, seen.calls[0].text) == ("tool_calls", "{}")
    assert n.repairs["empty-arguments"] == 1
    assert "args-truncated" not in n.repairs
    assert out.endswith(DONE)


def test_only_the_choice_with_the_cut_call_finishes_with_length():
    body = chunk(calls(entry(0, "call_1", "f", '{"a": 1}')), index=0) + chunk(
        calls(entry(0, "call_2", "f", '{"a": ')), index=1
    )
    out, _ = run(body)
    seen = reconstruct(out).choices
    assert [seen[0].finish_reason, seen[1].finish_reason] == ["tool_calls", "length"]


def test_length_keeps_a_cut_call_as_it_is():
    out, n = run(
        chunk(calls(entry(0, "call_1", "f", "")))
        + chunk(calls(entry(0, None, None, '{"a')))
        + chunk({}, "length")
        + DONE
    )
    seen = reconstruct(out).choices[0]
    assert (seen.finish_reason, seen.calls[0].text) == ("length", '{"a')
    assert "empty-arguments" not in n.repairs


def test_the_llamacpp_error_field_becomes_a_data_event():
    out, n = run(b"error: not json at all\n\n")
    assert out == b'data: {"error":{"message":"not json at all"}}\n\n'
    assert n.repairs["error-field"] == 1


# -- failing open ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b"data: not json\n\n",
        b"data: [1, 2]\n\n",
        b'data: {"choices": "no"}\n\n',
        b'data: {"choices": [1]}\n\n',
        chunk({"tool_calls": ["an entry that is a string"]}),
        chunk(calls({"index": 0, "function": ["not", "an", "object"]})),
        chunk(calls({"index": 1.5, "function": {"name": "f"}})),
        chunk(calls({"index": 0, "id": {"nested": 1}, "function": {"name": "f"}})),
        chunk(calls({"index": 0, "function": {"name": 7}})),
        b'data: {"choices":[{"index":0,"delta":{"content":"\\ud800"}}]}\n\n',
    ],
)
def test_what_is_not_understood_goes_out_raw_and_changes_no_state(body):
    n = normalizer()
    assert feed_each(n, body) == [[body]]
    assert n.close(complete=False) == []


def test_an_unterminated_tail_goes_out_after_what_was_held_and_nothing_follows():
    n = normalizer()
    sent = feed_each(n, chunk(calls(entry(0, "call_1", None, '{"a":1'))))
    sent.append(n.feed(RawBytes(b'data: {"cho', "unterminated")))
    assert sent[0] == []
    assert sent[1][-1] == b'data: {"cho'
    assert len(sent[1]) == 3  # the held opening and arguments, then the tail
    assert n.close(complete=True) == []


def test_an_oversize_event_stops_all_rewriting():
    n = normalizer()
    feed_each(n, chunk(calls(entry(0, "call_1", "f", "{"))))
    assert n.feed(RawBytes(b"x" * 10, "oversize")) == [b"x" * 10]
    later = chunk(calls(entry(0, "call_1", "f", "}")))
    assert feed_each(n, later) == [[later]]
    assert n.close(complete=True) == []
    assert n.repairs["cap-reached"] == 1


def test_the_cap_sends_what_is_held_and_forwards_the_rest_raw():
    n = normalizer(max_held_bytes=50)
    head = [
        chunk(calls(entry(0, "call_1", None, "{"))),
        chunk(calls(entry(0, None, None, '"a": "' + "x" * 60))),
    ]
    tail = [chunk(calls(entry(0, None, "f", '"}'))), chunk({}, "stop")]
    sent = feed_each(n, *head, *tail)
    assert sent[0] == []
    assert deltas(sent[1]) == [
        calls({"index": 0, "id": "call_1", "type": "function", "function": {"arguments": ""}}),
        calls({"index": 0, "function": {"arguments": '{"a": "' + "x" * 60}}),
    ]
    assert sent[2:] == [[tail[0]], [tail[1]]]
    assert n.repairs["cap-reached"] == 1
    assert n.close(complete=True) == [DONE]


# -- envelopes, ids, requests ----------------------------------------------------------------------


def test_a_split_chunk_keeps_its_envelope_usage_on_the_last_piece_logprobs_on_the_first():
    usage = {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}
    choice = {
        "index": 0,
        "delta": {"content": "Hi", **calls(entry(0, "c1", "f", "{}", type="function"))},
        "logprobs": {"content": []},
        "finish_reason": "tool_calls",
    }
    body = (
        b"data: "
        + json.dumps(
            {
                **ENVELOPE,
                "system_fingerprint": "fp",
                "x_extra": 1,
                "choices": [choice],
                "usage": usage,
            }
        ).encode()
        + b"\n\n"
    )
    out = [c for c in chunks(run(body)[0])[:-1] if isinstance(c, dict)]
    assert [c.get("usage") for c in out] == [None, None, usage]
    assert [c["choices"][0]["logprobs"] for c in out] == [{"content": []}, None, None]
    assert all(c["x_extra"] == 1 and c["system_fingerprint"] == "fp" for c in out)


def test_a_chunk_held_whole_still_sends_its_usage():
    usage = {"total_tokens": 9}
    out = run(
        chunk(calls(entry(0, "c1", None, "{}")), usage=usage) + chunk(calls(entry(0, None, "f"))),
        complete=False,
    )[0]
    assert chunks(out)[0] == {
        **ENVELOPE,
        "choices": [{"index": 0, "delta": {}, "finish_reason": None}],
        "usage": usage,
    }


def test_synthesized_ids_never_repeat_an_upstream_id():
    n = Chat(
        StreamNormalizer(
            UpstreamOptions(), RequestInfo(), new_id=iter(["taken0001", "fresh0001"]).__next__
        )
    )
    sent = feed_each(
        n, chunk(calls(entry(0, "taken0001", "f", "{}"))), chunk(calls(entry(1, None, "g", "{}")))
    )
    out = b"".join(b for piece in sent for b in piece) + b"".join(n.close(complete=True))
    assert [c.id for c in reconstruct(out).choices[0].calls] == ["taken0001", "fresh0001"]


def test_new_id_factory_makes_unique_mistral_valid_ids():
    new_id = new_id_factory()
    ids = [new_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[A-Za-z0-9]{9}", i) for i in ids)


def test_id_pool_gives_up_on_a_factory_that_repeats_itself():
    pool = IdPool(lambda: "same00001", ["same00001"])
    assert pool.fresh() == "same00001"


@pytest.mark.parametrize(
    ("body", "tools", "choice", "fallback", "extraction"),
    [
        (None, [], None, None, False),
        ("text", [], None, None, False),
        ({"tools": "no"}, [], None, None, False),
        ({"tools": [WEATHER, 3]}, [WEATHER], None, "get_weather", True),
        (
            {"tools": [WEATHER, WEATHER], "tool_choice": "none"},
            [WEATHER, WEATHER],
            "none",
            None,
            False,
        ),
        (
            {
                "tools": [WEATHER, WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "x"}},
            },
            [WEATHER, WEATHER],
            {"type": "function", "function": {"name": "x"}},
            "x",
            True,
        ),
        ({"tools": [{"type": "function"}]}, [{"type": "function"}], None, None, True),
    ],
)
def test_request_info_reads_any_body(body, tools, choice, fallback, extraction):
    info = RequestInfo.from_body(body)
    assert (info.tools, info.tool_choice, info.fallback_name, info.allows_extraction) == (
        tools,
        choice,
        fallback,
        extraction,
    )


def test_the_core_imports_no_io_library():
    code = (
        "import sys, proxy.core.protocols.chat.normalize, proxy.core.protocols.chat.completion;"
        "print(sorted({'aiohttp', 'asyncio'} & set(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_output_waiting_behind_a_held_call_counts_toward_the_cap():
    n = normalizer(max_held_bytes=300)
    held = chunk(calls(entry(0, "call_1", None, "{}")), index=1)
    others = [chunk({"content": "y" * 100}) for _ in range(4)]
    sent = feed_each(n, held, *others)
    assert sent[:2] == [[], []]  # waiting behind the nameless call of choice 1
    assert n.repairs["cap-reached"] == 1
    flat = [b for piece in sent for b in piece]
    assert deltas(flat[:1]) == [
        calls({"index": 0, "id": "call_1", "type": "function", "function": {"arguments": "{}"}})
    ]
    assert flat[1:] == others


def test_a_chunk_too_deep_to_write_back_goes_out_as_it_came():
    deep: Any = {}
    for _ in range(300):
        deep = {"d": deep}
    body = chunk(calls(entry(0, "call_1", "f", "{")), deep=deep)
    n = normalizer()
    assert feed_each(n, body) == [[body]]
