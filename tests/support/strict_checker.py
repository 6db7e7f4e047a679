"""A strict checker of streamed tool calls, and what a client reconstructs from a stream.

``check`` enforces the tool-call rules of docs/quirks.md's canonical chat stream (rules 6-11,
and rule 5's "text never shares a delta with a tool-call entry") per choice. It leaves out the
envelope rules that docs/quirks.md K1-K15 override (one choice only, no usage chunk, role on
the first delta...) and allows what they call legal: interleaved parallel calls (K10) and a
whole call in one delta with complete arguments (K1). ``form="S2"`` also
requires every call to come whole in one delta.

``reconstruct`` accumulates a stream the way the OpenAI SDKs do for a valid stream: calls by
index, argument fragments joined, text joined, the last finish reason.

Both read SSE with proxy.core.sse's decoder (tested on its own in tests/core/test_sse.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from proxy.core.sse import Event, SSEDecoder

_TEXT_KEYS = ("content", "reasoning_content", "reasoning", "refusal")


@dataclass
class CallSeen:
    index: Any  # each as the stream sent it
    id: Any
    name: Any
    arguments: list[str] = field(default_factory=list)
    whole: bool = False  # the opening delta carried complete arguments

    @property
    def text(self) -> str:
        return "".join(self.arguments)


@dataclass
class ChoiceSeen:
    index: int
    calls: list[CallSeen] = field(default_factory=list)
    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    finish_reason: Any = None
    finishes: int = 0


@dataclass
class StreamSeen:
    choices: dict[int, ChoiceSeen] = field(default_factory=dict)
    done: bool = False
    data_after_done: bool = False
    errors: list[Any] = field(default_factory=list)


def events(body: bytes) -> list[Event]:
    decoder = SSEDecoder()
    items = decoder.feed(body) + decoder.close()
    return [item for item in items if isinstance(item, Event)]


def chunks(body: bytes) -> list[dict[str, Any] | str]:
    """Each data event as a parsed object, "[DONE]" as that string; other data is skipped."""
    out: list[dict[str, Any] | str] = []
    for event in events(body):
        if event.data is None:
            continue
        if event.data == b"[DONE]":
            out.append("[DONE]")
            continue
        try:
            value = json.loads(event.data)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def is_complete_json(text: str) -> bool:
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict | list)


def reconstruct(body: bytes) -> StreamSeen:
    seen = StreamSeen()
    for chunk in chunks(body):
        if chunk == "[DONE]":
            seen.done = True
            continue
        assert isinstance(chunk, dict)
        if seen.done:
            seen.data_after_done = True
        if "error" in chunk:
            seen.errors.append(chunk["error"])
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            state = seen.choices.setdefault(index, ChoiceSeen(index))
            delta = choice.get("delta")
            if isinstance(delta, dict):
                for key, into in (
                    ("content", state.content),
                    ("reasoning_content", state.reasoning),
                ):
                    if isinstance(delta.get(key), str):
                        into.append(delta[key])
                if isinstance(delta.get("reasoning"), str):
                    state.reasoning.append(delta["reasoning"])
                for entry in delta.get("tool_calls") or []:
                    _accumulate(state, entry)
            if choice.get("finish_reason") is not None:
                state.finish_reason = choice["finish_reason"]
                state.finishes += 1
    return seen


def _accumulate(state: ChoiceSeen, entry: Any) -> None:
    if not isinstance(entry, dict):
        return
    function = entry.get("function")
    if not isinstance(function, dict):
        function = {}
    index = entry.get("index")
    call = next((c for c in state.calls if c.index == index), None)
    args = function.get("arguments")
    if call is None:
        call = CallSeen(index, entry.get("id"), function.get("name"))
        call.whole = isinstance(args, str) and is_complete_json(args)
        state.calls.append(call)
    if isinstance(args, str):
        call.arguments.append(args)


def check(body: bytes, *, form: str = "S1", complete: bool = True) -> list[str]:
    """Every violation of the rules, as readable lines; [] for a stream that keeps them all.

    ``complete=False`` is for a stream that stopped early: it need not end with [DONE] or a
    finish reason, and its last call's arguments may be cut short. A stream that reported an
    error (``data: {"error": ...}``) did not end well either: it need not end with [DONE].
    """
    problems: list[str] = []
    ids: set[str] = set()
    choices: dict[int, ChoiceSeen] = {}
    done = errored = False
    for number, chunk in enumerate(chunks(body)):
        where = f"chunk {number}"
        if chunk == "[DONE]":
            if done:
                problems.append(f"{where}: a second [DONE]")
            done = True
            continue
        assert isinstance(chunk, dict)
        if done:
            problems.append(f"{where}: data after [DONE]")
        errored = errored or "error" in chunk
        for choice in chunk.get("choices") or []:
            if isinstance(choice, dict):
                _check_choice(choice, choices, ids, form, f"{where}", problems)
    for state in choices.values():
        _check_end(state, complete, problems)
    if complete and not done and not errored:
        problems.append("the stream does not end with data: [DONE]")
    return problems


def _check_choice(
    choice: dict[str, Any],
    choices: dict[int, ChoiceSeen],
    ids: set[str],
    form: str,
    where: str,
    problems: list[str],
) -> None:
    index = choice.get("index", 0)
    where = f"{where}, choice {index}"
    state = choices.setdefault(index, ChoiceSeen(index))
    finish = choice.get("finish_reason")
    delta = choice.get("delta")
    tool_calls = delta.get("tool_calls") if isinstance(delta, dict) else None
    if tool_calls is not None:
        assert isinstance(delta, dict)
        if not isinstance(tool_calls, list):
            problems.append(f"{where}: tool_calls is not an array (rule 6)")
            tool_calls = []
        elif len(tool_calls) != 1:
            problems.append(f"{where}: {len(tool_calls)} tool_calls entries in one delta (rule 7)")
        if any(isinstance(delta.get(k), str) and delta[k] for k in _TEXT_KEYS):
            problems.append(f"{where}: text in the same delta as a tool-call entry (rule 5)")
        if finish is not None:
            problems.append(f"{where}: finish_reason on a chunk with tool calls (rule 11)")
        if state.finishes:
            problems.append(f"{where}: a tool-call delta after the finish reason (rule 11)")
        for entry in tool_calls:
            _check_entry(entry, state, ids, form, where, problems)
    if finish is not None:
        if state.finishes:
            problems.append(f"{where}: a second finish_reason (rule 11)")
        state.finish_reason = finish
        state.finishes += 1


def _check_entry(
    entry: Any, state: ChoiceSeen, ids: set[str], form: str, where: str, problems: list[str]
) -> None:
    if not isinstance(entry, dict):
        problems.append(f"{where}: a tool_calls entry that is not an object")
        return
    index = entry.get("index")
    function = entry.get("function")
    if not isinstance(function, dict):
        problems.append(f"{where}: entry without a function object")
        function = {}
    args = function.get("arguments")
    if not isinstance(args, str):
        problems.append(f"{where}: arguments is not a string: {args!r} (rule 10)")
        args = ""
    if "id" in function:
        problems.append(f"{where}: id inside function (rule 8)")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        problems.append(f"{where}: index {index!r} is not a non-negative integer (rule 6)")
        return
    call = next((c for c in state.calls if c.index == index), None)
    if call is None:
        if index != len(state.calls):
            problems.append(
                f"{where}: call index {index} opened after {len(state.calls)} calls (rule 6)"
            )
        ident, name = entry.get("id"), function.get("name")
        if not isinstance(ident, str) or not ident:
            problems.append(f"{where}: opening delta of call {index} has no id (rule 8)")
        elif ident in ids:
            problems.append(f"{where}: id {ident!r} is not unique in the response (rule 8)")
        else:
            ids.add(ident)
        if entry.get("type") != "function":
            problems.append(f"{where}: opening delta of call {index} has no type function (rule 8)")
        if not isinstance(name, str) or not name:
            problems.append(f"{where}: opening delta of call {index} has no name (rule 8)")
        call = CallSeen(index, ident, name, [args], whole=is_complete_json(args))
        if args and not call.whole and form == "S1":
            # S2 sends even a call cut short in one delta; rule 10 judges its arguments
            problems.append(
                f"{where}: opening delta of call {index} has partial arguments (rule 8)"
            )
        state.calls.append(call)
        return
    for key in ("id", "type"):
        if key in entry:
            problems.append(f"{where}: continuation of call {index} repeats {key} (rule 9)")
    if "name" in function:
        problems.append(f"{where}: continuation of call {index} repeats the name (rule 9)")
    if "arguments" not in function:
        problems.append(f"{where}: continuation of call {index} has no arguments (rule 9)")
    if form == "S2":
        problems.append(f"{where}: call {index} continued after its whole delta (S2)")
    call.arguments.append(args)


def _check_end(state: ChoiceSeen, complete: bool, problems: list[str]) -> None:
    where = f"choice {state.index}"
    truncated = state.finish_reason == "length" or not complete
    for number, call in enumerate(state.calls):
        last = number == len(state.calls) - 1
        text = call.text
        if not text:
            if not truncated:
                problems.append(
                    f"{where}: call {call.index} has no arguments, not even {{}} (rule 10)"
                )
        elif not is_complete_json(text) and not (truncated and last):
            problems.append(
                f"{where}: call {call.index} arguments are not one JSON value: {text!r} (rule 10)"
            )
    if not state.calls:
        return
    if state.finish_reason is None:
        if complete:
            problems.append(f"{where}: calls were sent but no finish_reason (rule 11)")
    elif state.finish_reason not in ("tool_calls", "length"):
        problems.append(
            f"{where}: finish_reason {state.finish_reason!r} after tool calls (rule 11)"
        )
