"""Markup in text becomes tool calls (Q32): the normalizer's side of the dialects.

The real dialects do the parsing (their own tests, in tests/core/markup/, check their grammars);
what is checked here is how the normalizer gates extraction, maps segments to deltas, names
the dialect in its repair record and fails open.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import proxy.core.markup
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, normalize_completion
from tests.core.markup.examples import SAMPLES
from tests.core.markup.helpers import tokens
from tests.support.chat_markup import ON, TOOLS, FailingHermes, event, hermes, stream
from tests.support.normalizer import counting_ids, cut, run
from tests.support.strict_checker import check, reconstruct

# Hermes markup streamed as a tokenizer cuts it: the markers split over several chunks.
TOKENS = [
    "Let me look.",
    "\n<tool",
    '_call>\n{"na',
    'me": "get_',
    'weather", "arguments": {"loc',
    'ation": "Paris"}}\n</tool',
    "_call>",
    " Done.",
]
KIMI = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
    '<|tool_call_argument_begin|>{"location": "Paris"}<|tool_call_end|>'
    "<|tool_calls_section_end|>"
)
GLM = "<tool_call>get_weather<arg_key>location</arg_key><arg_value>Lyon</arg_value></tool_call>"


def normalize(
    body: bytes | list[bytes],
    options: UpstreamOptions = ON,
    request: Any = TOOLS,
    complete: bool = True,
):
    return run(body, options=options, request=RequestInfo.from_body(request), complete=complete)


@pytest.mark.parametrize("form", ["S1", "S2"])
def test_markup_in_content_becomes_a_call_with_the_text_around_it_kept(form):
    options = UpstreamOptions(dialects=("hermes",), coalesce=form == "S2")
    out, n = normalize(stream(*TOKENS), options)
    assert check(out, form=form) == []
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == "Let me look.\n Done."
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert seen.calls[0].id == "call00001"
    assert seen.finish_reason == "tool_calls"
    assert n.repairs["markup-in-content:hermes"] == 1
    assert n.repairs["finish-reason-stop"] == 1


def test_the_markup_id_is_kept():
    out, _ = normalize(stream(KIMI), UpstreamOptions(dialects=("kimi_k2",)))
    assert reconstruct(out).choices[0].calls[0].id == "functions.get_weather:0"


def test_with_every_dialect_on_each_call_is_recorded_under_its_own_dialect():
    out, n = normalize(stream(GLM, " and ", KIMI), UpstreamOptions(dialects=("auto",)))
    calls = reconstruct(out).choices[0].calls
    assert [json.loads(c.text) for c in calls] == [{"location": "Lyon"}, {"location": "Paris"}]
    assert {k: v for k, v in n.repairs.items() if k.startswith("markup")} == {
        "markup-in-content:glm": 1,
        "markup-in-content:kimi_k2": 1,
    }


@pytest.mark.parametrize(
    ("options", "request_body"),
    [
        (UpstreamOptions(), TOOLS),
        (ON, {}),
        (ON, {**TOOLS, "tool_choice": "none"}),
        (UpstreamOptions(dialects=("mistral", "kimi_k2")), TOOLS),
    ],
    ids=["no dialects", "no tools", "tool_choice none", "other dialects"],
)
def test_text_stays_text_unless_extraction_applies(options, request_body):
    body = stream(*TOKENS)
    assert normalize(body, options, request_body)[0] == body


def test_text_without_markup_passes_byte_for_byte():
    body = stream("Hello", " <b>world</b>", " 1 < 2", " [x] {y}")
    assert normalize(body, UpstreamOptions(dialects=("auto",)))[0] == body


def test_only_the_tail_that_could_begin_a_marker_is_held():
    out, _ = normalize(stream("Hello <tool", "box> there"))
    contents = [c["choices"][0]["delta"].get("content") for c in _chunks(out)]
    assert contents == [None, "Hello ", "<toolbox> there", None]


def test_text_ending_like_a_harmony_word_opener_is_not_held():
    # " basic", " a", " data" end like "commentary to=functions." or "assistantcommentary...":
    # with every dialect on, each token still goes out in the chunk it came in
    tokens = ["Hello", " basic", " a", " data", " co", "ass"]
    out, _ = normalize(stream(*tokens), UpstreamOptions(dialects=("auto",)))
    contents = [c["choices"][0]["delta"].get("content") for c in _chunks(out)]
    assert contents == [None, *tokens, None]


def test_a_stripped_harmony_stream_becomes_a_call_token_by_token():
    tokens = ["analysis", "Need", " weather", ".", "assistant", "comment", "ary", " to", "="]
    tokens += ["functions", ".get", "_weather", " json", '{"', "location", '": "', "Paris", '"}']
    out, n = normalize(stream(*tokens), UpstreamOptions(dialects=("auto",)))
    assert check(out, form="S1") == []
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == "analysisNeed weather."
    assert [(c.name, json.loads(c.text)) for c in seen.calls] == [
        ("get_weather", {"location": "Paris"})
    ]
    assert n.repairs["markup-in-content:harmony"] == 1


def test_markup_cut_short_is_given_back_as_text_and_recorded():
    # Issue 24 item 4: markup that stops inside a call is the text it was, and the finish the
    # upstream's (before: a call with what arrived, finishing with length).
    markup = '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1'
    out, n = normalize(stream(markup))
    seen = reconstruct(out).choices[0]
    assert seen.calls == []
    assert "".join(seen.content) == markup
    assert n.repairs["markup-broken"] == 1
    assert seen.finish_reason == "stop"
    assert "args-truncated" not in n.repairs


@pytest.mark.parametrize(
    "markup",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1',
        # the arguments are whole, but the dialect had more to read: the block never closed
        '<tool_call>\n{"name": "get_weather", "arguments": {"a": 1}',
    ],
    ids=["in-the-arguments", "after-the-arguments"],
)
def test_a_clean_end_inside_markup_gives_it_back_as_text(markup: str):
    # Issue 24 item 4: the block never closed, so it is no call but the text it was (before:
    # a call cut off, finishing with length).
    body = event({"role": "assistant", "content": None}) + event({"content": markup})
    out, n = normalize(body)  # no finish chunk, no [DONE]
    seen = reconstruct(out).choices[0]
    assert seen.calls == []
    assert "".join(seen.content) == markup
    assert n.repairs["markup-broken"] == 1
    assert "args-truncated" not in n.repairs
    assert out.endswith(b"data: [DONE]\n\n")


def test_a_clean_end_after_closed_markup_finishes_with_tool_calls():
    body = event({"role": "assistant", "content": None})
    out, n = normalize(body + event({"content": hermes("get_weather", '{"a": 1}')}))
    assert reconstruct(out).choices[0].finish_reason == "tool_calls"
    assert "args-truncated" not in n.repairs


def test_reasoning_is_searched_only_when_asked():
    body = stream(hermes("get_weather", "{}"), key="reasoning_content")
    assert normalize(body)[0] == body
    out, _ = normalize(body, UpstreamOptions(dialects=("hermes",), extract_from_reasoning=True))
    assert [c.name for c in reconstruct(out).choices[0].calls] == ["get_weather"]


@pytest.mark.parametrize("form", ["S1", "S2"])
def test_markup_after_a_structured_call_is_still_extracted_and_held_text_stays_text(form):
    # llama.cpp parses the first call and leaves the next ones as markup (issue 16); a markup
    # call that is no copy of the structured call in its place is a new call (issue 24 item 5)
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
    later = " " + hermes("get_weather", "{}")
    body = b"".join(
        event(delta, finish)
        for delta, finish in (
            ({"content": "x <tool_"}, None),
            (structured, None),
            ({"content": later}, "tool_calls"),
        )
    )
    out, n = normalize(body, UpstreamOptions(dialects=("hermes",), coalesce=form == "S2"))
    assert check(out) == []
    seen = reconstruct(out).choices[0]
    # "<tool_" was held as a possible marker: it turns out text, after the structured call
    assert "".join(seen.content) == "x <tool_ "
    assert [(c.index, c.name) for c in seen.calls] == [(0, "g"), (1, "get_weather")]
    assert "call-duplicated" not in n.repairs


def test_text_a_dialect_holds_counts_toward_the_cap():
    # the name comes last, so hermes holds the whole call until it: past the cap the stream
    # gives up, and what the dialect held goes out as the text it was
    options = UpstreamOptions(dialects=("hermes",), max_held_bytes=20)
    texts = ['<tool_call>{"arguments": {"a": "', "x" * 40, '"}, "name": "get_weather"}', "after"]
    out, n = normalize(stream(*texts), options)
    assert n.repairs["cap-reached"] == 1
    seen = reconstruct(out).choices[0]
    assert seen.calls == []
    assert "".join(seen.content) == "".join(texts)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2000), max_size=10))
def test_extraction_is_the_same_however_the_upstream_bytes_are_cut(points):
    body = stream(*TOKENS)
    assert normalize(cut(body, points))[0] == normalize(body)[0]


def completion(content: str) -> bytes:
    message = {"role": "assistant", "content": content}
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        }
    ).encode()


def test_markup_in_a_message_becomes_calls_when_not_streamed():
    body = completion("Sure. " + hermes("get_weather", '{"location": "Paris"}'))
    out, repairs = normalize_completion(
        body,
        UpstreamOptions(dialects=("auto",)),
        RequestInfo.from_body(TOOLS),
        new_id=counting_ids(),
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
    assert repairs["markup-in-content:hermes"] == 1
    assert (
        normalize_completion(
            body, UpstreamOptions(), RequestInfo.from_body(TOOLS), new_id=counting_ids()
        )[0]
        == body
    )


@pytest.mark.parametrize(
    "markup",
    [
        '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Pa',
        '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}',
    ],
    ids=["in-the-arguments", "after-the-arguments"],
)
def test_markup_cut_off_in_a_message_stays_text(markup: str):
    # Issue 24 item 4: as in a stream, the markup that never closed is no call (before: a
    # call cut off, finishing with length); the message comes back as it came.
    body = completion(markup)
    out, repairs = normalize_completion(
        body, ON, RequestInfo.from_body(TOOLS), new_id=counting_ids()
    )
    assert out == body
    assert repairs == {"markup-broken": 1}


# -- a dialect that raises ---------------------------------------------------------------------


@pytest.fixture
def failing_dialect(monkeypatch):
    monkeypatch.setattr(
        proxy.core.markup, "build_extractor", lambda names, tools, begun=False: FailingHermes(tools)
    )


@pytest.mark.usefixtures("failing_dialect")
def test_a_failing_dialect_gives_back_its_text_and_stops():
    later = hermes("get_weather", "{}")
    out, n = normalize(stream("a <tool", "_ca", "BOOM", later))
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == "a <tool_caBOOM" + later
    assert seen.calls == []
    assert n.repairs["dialect-error"] == 1


@pytest.mark.usefixtures("failing_dialect")
def test_a_failing_dialect_leaves_a_whole_message_as_it_came():
    body = completion("BOOM " + hermes("get_weather", "{}"))
    out, repairs = normalize_completion(
        body, ON, RequestInfo.from_body(TOOLS), new_id=counting_ids()
    )
    assert out == body
    assert repairs == {"dialect-error": 1}


def _chunks(out: bytes) -> list[dict[str, Any]]:
    return [
        json.loads(line[len(b"data: ") :])
        for line in out.split(b"\n\n")
        if line.startswith(b"data: {")
    ]


# The dialects of issue 16, each streamed token by token from its contract sample.
NEW_DIALECTS = ("gemma4", "hunyuan", "nemotron", "lfm2")


@pytest.mark.parametrize("name", NEW_DIALECTS)
def test_new_dialects_become_calls_only_when_tools_were_offered(name):
    body = stream(*tokens(SAMPLES[name]))
    out, n = normalize(body, UpstreamOptions(dialects=(name,)))
    assert check(out, form="S1") == []
    assert reconstruct(out).choices[0].calls
    assert n.repairs[f"markup-in-content:{name}"] >= 1
    assert normalize(body, UpstreamOptions(dialects=(name,)), {})[0] == body


@pytest.mark.parametrize("name", NEW_DIALECTS)
def test_new_dialects_cut_inside_a_call_give_it_back_and_count_the_break(name):
    # Issue 24 item 4: the cut call is the text it was (before: a call closed where it broke)
    sample = SAMPLES[name]
    cut_at = sample.index("Zürich") + 3
    out, n = normalize(stream(*tokens(sample[:cut_at])), UpstreamOptions(dialects=(name,)))
    seen = reconstruct(out).choices[0]
    assert seen.calls == []
    assert "".join(seen.content) == sample[:cut_at]
    # each block that broke counts: Hunyuan's <answer> and the <tool_calls> inside it
    assert n.repairs["markup-broken"] == (2 if name == "hunyuan" else 1)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("gemma4", "<|tool_call>call:get weather{}<tool_call|> stays"),
        ("hunyuan", "<answer>Plain answer.</answer>"),
        ("nemotron", "<TOOLCALL>oops</TOOLCALL>"),
        ("lfm2", "<|tool_call_start|>nothing<|tool_call_end|>"),
    ],
)
def test_new_dialects_leave_malformed_blocks_as_the_text_they_were(name, content):
    out, n = normalize(stream(*tokens(content)), UpstreamOptions(dialects=(name,)))
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == content
    assert not seen.calls
    assert not n.repairs  # a held marker is released as text in the next delta: no repair


# -- markup after structured calls: copies and new calls (issue 24 item 5) --------------------


def _structured(*calls: tuple[str, str]) -> list[bytes]:
    return [
        event(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": f"call_s{i}",
                        "type": "function",
                        "function": {"name": name, "arguments": arguments},
                    }
                ]
            }
        )
        for i, (name, arguments) in enumerate(calls)
    ]


def _then_markup(structured: list[bytes], *markup: tuple[str, str]) -> bytes:
    texts = [event({"content": hermes(name, arguments)}) for name, arguments in markup]
    head = event({"role": "assistant", "content": None})
    return head + b"".join(structured) + b"".join(texts) + event({}, "tool_calls")


WEATHER = ("get_weather", '{"city": "Paris"}')
TIME = ("get_time", '{"tz": "UTC"}')


@pytest.mark.parametrize("form", ["S1", "S2"])
@pytest.mark.parametrize(
    ("structured", "markup", "expected", "copies"),
    [
        # a server that streams its parsed calls and leaves their text in content: copies
        ([WEATHER, TIME], [WEATHER, TIME], ["get_weather", "get_time"], 2),
        # llama.cpp b5494: the first call parsed, the next ones left as markup (issue 16's
        # rule dropped the third call, equal to the first: it was the model's own)
        ([WEATHER], [TIME, WEATHER], ["get_weather", "get_time", "get_weather"], 0),
        # the first markup call is no copy of the first structured one: a new call, which
        # repeats the call before it (counted, kept: dedupe_calls is off)
        ([WEATHER, TIME], [TIME], ["get_weather", "get_time", "get_time"], 1),
        # a copy, then a new call
        ([WEATHER], [WEATHER, TIME], ["get_weather", "get_time"], 1),
        # the same name with other arguments is a new call
        ([WEATHER], [("get_weather", '{"city": "Rome"}')], ["get_weather", "get_weather"], 0),
    ],
    ids=["copies", "b5494-new-calls", "out-of-order", "copy-then-new", "other-arguments"],
)
def test_the_kth_markup_call_is_a_copy_only_of_the_kth_structured_call(
    form, structured, markup, expected, copies
):
    body = _then_markup(_structured(*structured), *markup)
    out, n = normalize(body, UpstreamOptions(dialects=("hermes",), coalesce=form == "S2"))
    assert check(out, form=form) == []
    seen = reconstruct(out).choices[0]
    assert [c.name for c in seen.calls] == expected
    assert [c.index for c in seen.calls] == list(range(len(expected)))
    assert n.repairs["call-duplicated"] == copies


def test_repeats_among_new_markup_calls_fall_under_dedupe_calls():
    body = _then_markup(_structured(WEATHER), TIME, TIME)
    kept = reconstruct(normalize(body)[0]).choices[0].calls
    assert [c.name for c in kept] == ["get_weather", "get_time", "get_time"]
    deduped, n = normalize(body, UpstreamOptions(dialects=("hermes",), dedupe_calls=True))
    assert [c.name for c in reconstruct(deduped).choices[0].calls] == ["get_weather", "get_time"]
    assert n.repairs["call-duplicated"] == 1


# -- an unfinished markup fragment before a structured call (issue 24 item 3) -----------------


def _fragment_then(fragment: list[str], name: str | None) -> bytes:
    head = event({"role": "assistant", "content": None})
    texts = b"".join(event({"content": piece}) for piece in fragment)
    call = _structured((name, '{"city": "Paris"}')) if name else []
    return head + texts + b"".join(call) + event({}, "tool_calls" if name else "stop")


QWEN = UpstreamOptions(dialects=("qwen3_coder",))


@pytest.mark.parametrize("form", ["S1", "S2"])
@pytest.mark.parametrize(
    "fragment",
    [
        ["<tool_call>", "\n", "<function=", "get_current", "_weather"],  # llama.cpp b6522
        ["<tool_call>", "\n", "<function=", "get_cur"],  # the beginning of the name
    ],
    ids=["whole-name", "name-prefix"],
)
def test_a_fragment_naming_the_structured_call_after_it_is_dropped(form, fragment):
    body = _fragment_then(fragment, "get_current_weather")
    options = UpstreamOptions(dialects=("qwen3_coder",), coalesce=form == "S2")
    out, n = normalize(body, options)
    assert check(out, form=form) == []
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == ""
    assert [c.name for c in seen.calls] == ["get_current_weather"]
    assert n.repairs["markup-fragment-dropped"] == 1


@pytest.mark.parametrize(
    ("fragment", "name"),
    [
        (["<tool_call>", "\n", "<function=", "get_time"], "get_current_weather"),  # disagrees
        (["<tool_call>", "\n", "<function=", "get_current_weather"], None),  # no call after
    ],
    ids=["another-name", "no-structured-call"],
)
def test_a_fragment_that_names_no_later_structured_call_stays_text(fragment, name):
    out, n = normalize(_fragment_then(fragment, name), QWEN)
    seen = reconstruct(out).choices[0]
    assert "".join(seen.content) == "".join(fragment)
    assert "markup-fragment-dropped" not in n.repairs
