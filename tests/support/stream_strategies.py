"""Hypothesis strategies: chat-completion streams with known contents, in quirky shapes.

A stream is drawn as a script (per choice: reasoning and text pieces, calls with name, id and
argument text, a finish) and a shape (the quirks of one upstream, docs/quirks.md Q1-Q27), then
rendered to SSE bytes. ``Drawn.script`` is what a client must get back after normalizing.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

NAMES = ["get_weather", "get_time", "search_web", "run_code"]

json_leaf = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | st.text(max_size=6)
json_value = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)
arguments_object = st.dictionaries(st.text(min_size=1, max_size=6), json_value, max_size=3)


@dataclass
class Call:
    name: str
    id: str | None
    args: str  # "" for a call the upstream sends no argument text for


@dataclass
class Choice:
    index: int
    reasoning: list[str]
    content: list[str]
    calls: list[Call]
    finish: str | None  # what a client must see at the end


@dataclass
class Drawn:
    body: bytes
    choices: list[Choice]
    shape: dict[str, Any] = field(default_factory=dict)


CANONICAL = {
    "first_args": "empty",
    "id_in_function": False,
    "type": "first",
    "repeat_id": False,
    "cont_name": "absent",
    "null_fields": False,
    "index": "int",
    "container": "array",
    "nameless_opening": False,
    "args_object": False,
    "interleave": False,
    "empty_tool_calls": None,
    "text_with_call": False,
    "finish": "separate",
    "done": True,
    "role_every": False,
}

quirky_shape = st.fixed_dictionaries(
    {
        "first_args": st.sampled_from(["empty", "partial", "absent", "whole"]),  # Q13, Q15, Q16
        "id_in_function": st.booleans(),  # Q3
        "type": st.sampled_from(["first", "missing", "every", "upper"]),  # Q3, Q5, Q2
        "repeat_id": st.booleans(),  # Q4
        "cont_name": st.sampled_from(
            ["absent", "same", "empty", "null-string", "null"]
        ),  # Q1, Q2, Q6
        "null_fields": st.booleans(),  # Q6
        "index": st.sampled_from(["int", "str", "offset", "missing"]),  # Q8, Q9, Q11
        "container": st.sampled_from(["array", "object"]),  # Q20
        "nameless_opening": st.booleans(),  # Q14
        "args_object": st.booleans(),  # Q19 (whole calls only)
        "interleave": st.booleans(),  # K10
        "empty_tool_calls": st.sampled_from([None, "null", "[]"]),  # Q21
        "text_with_call": st.booleans(),  # rule 5
        "finish": st.sampled_from(
            ["separate", "stop", "on_last", "none", "eos_token", "empty_then_stop"]
        ),
        "done": st.booleans(),  # Q27
        "role_every": st.booleans(),  # Q34
    }
)

canonical_shape = st.fixed_dictionaries(
    {
        **{k: st.just(v) for k, v in CANONICAL.items()},
        "first_args": st.sampled_from(["empty", "whole"]),
        "interleave": st.booleans(),
    }
)


def _dump(value: Any, style: tuple[str, str], ascii_only: bool) -> str:
    return json.dumps(value, separators=style, ensure_ascii=ascii_only)


@st.composite
def _script_choice(
    draw, index: int, shape: dict[str, Any], ids: list[int], canonical: bool
) -> Choice:
    style = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    ascii_only = draw(st.booleans())
    calls = []
    for _ in range(draw(st.integers(0, 3))):
        obj = draw(st.none() | arguments_object)
        # obj None: sometimes a call without any argument text (Venice, Q15)
        bare = obj is None and not canonical and draw(st.booleans())
        args = "" if bare else _dump(obj or {}, style, ascii_only)
        ids[0] += 1
        given = canonical or shape["index"] == "missing" or draw(st.booleans())
        ident = (
            draw(st.sampled_from([f"call_{ids[0]:04d}", f"k{ids[0]:08d}", f"functions.x:{ids[0]}"]))
            if given
            else None
        )
        calls.append(Call(draw(st.sampled_from(NAMES)), ident, args))
    text = st.text(st.characters(blacklist_categories=["Cs"]), min_size=1, max_size=6)
    reasoning = draw(st.lists(text, max_size=2))
    content = draw(st.lists(text, max_size=3))
    # with calls, a missing finish is synthesized (Q25)
    finish = "tool_calls" if calls else None if shape["finish"] == "none" else "stop"
    return Choice(index, reasoning, content, calls, finish)


def _split(draw, text: str) -> list[str]:
    if len(text) < 2:
        return [text]
    points = sorted(set(draw(st.lists(st.integers(1, len(text) - 1), max_size=4))))
    edges = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(edges)]


def _entries(draw, call: Call, number: int, shape: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_calls entries of one call, in the order the upstream sends them."""
    key: Any = {"int": number, "str": str(number), "offset": number + 1, "missing": None}[
        shape["index"]
    ]

    def entry(function: dict[str, Any], *, opening: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if key is not None:
            out["index"] = key
        if call.id is not None and (opening or shape["repeat_id"]):
            if shape["id_in_function"]:
                function = {**function, "id": call.id}
            else:
                out["id"] = call.id
        elif not opening and shape["null_fields"]:
            out["id"] = None
        if shape["type"] == "every" or (opening and shape["type"] == "first"):
            out["type"] = "function"
        elif shape["type"] == "upper":
            out["type"] = "FUNCTION"
        elif not opening and shape["null_fields"]:
            out["type"] = None
        out["function"] = function
        return out

    def cont_function(text: str) -> dict[str, Any]:
        name: dict[str, dict[str, Any]] = {
            "absent": {},
            "same": {"name": call.name},
            "empty": {"name": ""},
            "null-string": {"name": "null"},
            "null": {"name": None},
        }
        return {**name[shape["cont_name"]], "arguments": text}

    fragments = _split(draw, call.args) if call.args else []
    first = shape["first_args"]
    entries = []
    if shape["nameless_opening"]:
        entries.append(entry({"name": "", "arguments": ""}, opening=True))
    if first == "whole" or not fragments:
        args: Any = call.args
        if shape["args_object"] and call.args:
            args = json.loads(call.args)
        function: dict[str, Any] = {"name": call.name}
        if call.args or first != "absent":
            function["arguments"] = args
        entries.append(entry(function, opening=not shape["nameless_opening"]))
        return entries
    if first == "partial":
        opening_fn = {"name": call.name, "arguments": fragments.pop(0)}
    elif first == "absent":
        opening_fn = {"name": call.name}
    else:
        opening_fn = {"name": call.name, "arguments": ""}
    entries.append(entry(opening_fn, opening=not shape["nameless_opening"]))
    entries += [entry(cont_function(text), opening=False) for text in fragments]
    return entries


@st.composite
def streams(draw, *, canonical: bool = False, max_choices: int = 2) -> Drawn:
    """A stream in a quirky shape; ``canonical``: in the S1 form already (ids, arguments)."""
    shape = draw(canonical_shape if canonical else quirky_shape)
    if shape["index"] == "missing":
        shape["interleave"] = False  # calls without index are told apart by their ids only in order
    if shape["nameless_opening"]:
        shape["interleave"] = False
    ids = [0]
    n = draw(st.integers(1, max_choices))
    choices = [draw(_script_choice(i, shape, ids, canonical)) for i in range(n)]
    envelope: dict[str, Any] = {
        "id": "chatcmpl-" + draw(st.text("abc123", min_size=1, max_size=6)),
        "object": "chat.completion.chunk",
        "created": 1770000000,
        "model": "m",
    }
    if draw(st.booleans()):
        envelope["system_fingerprint"] = "fp_x"
    extra = draw(st.sampled_from([{}, {"usage": None}, {"x_extra": {"k": 1}}]))
    style = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    per_choice = [_choice_chunks(draw, choice, shape) for choice in choices]
    order = draw(st.permutations([i for i, chunks in enumerate(per_choice) for _ in chunks]))
    positions = [0] * len(per_choice)
    events = []
    for i in order:
        delta, finish = per_choice[i][positions[i]]
        positions[i] += 1
        choice_obj: dict[str, Any] = {"index": choices[i].index, "delta": delta}
        if finish is not _ABSENT:
            choice_obj["finish_reason"] = finish
        chunk = {**envelope, "choices": [choice_obj], **extra}
        events.append("data: " + json.dumps(chunk, separators=style, ensure_ascii=False) + "\n\n")
    if shape["done"]:
        events.append("data: [DONE]\n\n")
    body = "".join(events)
    if draw(st.booleans()):
        body = body.replace("\n", "\r\n")
    return Drawn(body.encode(), choices, shape)


_ABSENT = object()


def _choice_chunks(draw, choice: Choice, shape: dict[str, Any]) -> list[tuple[dict[str, Any], Any]]:
    """(delta, finish_reason) per chunk of one choice."""
    finish_mode = shape["finish"]
    running = "" if finish_mode == "empty_then_stop" else None
    chunks: list[tuple[dict[str, Any], Any]] = []

    def extra(delta: dict[str, Any]) -> dict[str, Any]:
        if shape["role_every"]:
            delta = {"role": "assistant", **delta}
        if shape["empty_tool_calls"] is not None and "tool_calls" not in delta:
            delta["tool_calls"] = None if shape["empty_tool_calls"] == "null" else []
        return delta

    chunks.append(({"role": "assistant", "content": None}, running))
    for text in choice.reasoning:
        chunks.append((extra({"reasoning_content": text}), running))
    content = list(choice.content)
    held_text = content.pop() if content and choice.calls and shape["text_with_call"] else None
    for text in content:
        chunks.append((extra({"content": text}), running))
    per_call = [_entries(draw, call, number, shape) for number, call in enumerate(choice.calls)]
    if shape["interleave"] and len(per_call) > 1:
        sequence = [calls[0] for calls in per_call]
        rest = [calls[1:] for calls in per_call]
        order = draw(st.permutations([i for i, r in enumerate(rest) for _ in r]))
        positions = [0] * len(rest)
        for i in order:
            sequence.append(rest[i][positions[i]])
            positions[i] += 1
    else:
        sequence = [entry for calls in per_call for entry in calls]
    for number, entry in enumerate(sequence):
        delta: dict[str, Any] = {"tool_calls": entry if shape["container"] == "object" else [entry]}
        if number == 0 and held_text is not None:
            delta = {"content": held_text, **delta}
        chunks.append((extra(delta), running))
    if held_text is not None and not sequence:
        chunks.append((extra({"content": held_text}), running))
    final = {
        "separate": "tool_calls",
        "stop": "stop",
        "on_last": "tool_calls",
        "eos_token": "eos_token",
        "empty_then_stop": "stop",
        "none": None,
    }[finish_mode]
    if not choice.calls and final == "tool_calls":
        final = "stop"
    if final is None:
        return chunks
    if finish_mode == "on_last" and len(chunks) > 1:
        chunks[-1] = (chunks[-1][0], final)
    else:
        chunks.append(({}, final))
    return chunks


@st.composite
def text_streams(draw) -> bytes:
    """A stream without tool calls that ends properly, with the legal variations around it."""
    envelope = {"id": "chatcmpl-t", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    style = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    n = draw(st.integers(1, 2))
    events = []
    if draw(st.booleans()):
        events.append(": OPENROUTER PROCESSING\n\n")
    if draw(st.booleans()):
        # Azure's first chunk, named a chat.completion.chunk: its real `"object":""` is
        # repaired (the golden case q29)
        azure = {"id": "", "object": "chat.completion.chunk", "choices": []}
        events.append(
            "data: " + json.dumps({**azure, "prompt_filter_results": []}, separators=style) + "\n\n"
        )
    text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=8)
    for index in range(n):
        events.append(
            "data: "
            + json.dumps(
                {
                    **envelope,
                    "choices": [
                        {
                            "index": index,
                            "delta": {"role": "assistant", "content": ""},
                            "finish_reason": None,
                        }
                    ],
                },
                separators=style,
            )
            + "\n\n"
        )
    for piece in draw(
        st.lists(
            st.tuples(
                st.integers(0, n - 1),
                st.sampled_from(["content", "reasoning_content", "reasoning"]),
                text,
            ),
            max_size=8,
        )
    ):
        index, key, value = piece
        choice = {"index": index, "delta": {key: value}, "finish_reason": None, "logprobs": None}
        events.append(
            "data: "
            + json.dumps(
                {**envelope, "choices": [choice], "usage": None},
                separators=style,
                ensure_ascii=draw(st.booleans()),
            )
            + "\n\n"
        )
    for index in range(n):
        finish = draw(st.sampled_from(["stop", "length", "content_filter"]))
        events.append(
            "data: "
            + json.dumps(
                {**envelope, "choices": [{"index": index, "delta": {}, "finish_reason": finish}]},
                separators=style,
            )
            + "\n\n"
        )
    if draw(st.booleans()):
        events.append(
            "data: "
            + json.dumps(
                {**envelope, "choices": [], "usage": {"total_tokens": 5}}, separators=style
            )
            + "\n\n"
        )
    events.append("data: [DONE]\n\n")
    body = "".join(events)
    if draw(st.booleans()):
        body = body.replace("\n", "\r\n")
    return body.encode()
