"""The rules about roles and their order that mainstream chat templates share.

Each function takes the message list and returns a new one, or the very list when it has
nothing to change (``is`` tells the caller whether to count the repair).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import Any

import orjson

from proxy.core.request_repairs.content import TEXT_JOIN, as_parts, joined, text_only

JSONObject = dict[str, Any]


def developer_as_system(messages: list[Any]) -> list[Any]:
    """``developer`` (the OpenAI name since o1) becomes ``system``, the name templates know."""
    if not any(isinstance(m, dict) and m.get("role") == "developer" for m in messages):
        return messages
    return [
        {**m, "role": "system"} if isinstance(m, dict) and m.get("role") == "developer" else m
        for m in messages
    ]


def system_message(texts: Iterable[str]) -> list[JSONObject]:
    """The one leading system message holding ``texts`` in order, a blank line between them
    (none when every text is empty). The Messages translation builds its system message here
    too, so that both protocols merge alike."""
    kept = [text for text in texts if text]
    return [{"role": "system", "content": TEXT_JOIN.join(kept)}] if kept else []


def merge_system(messages: list[Any]) -> list[Any]:
    """System messages anywhere in the list -> one leading system message.

    Templates take a system message only first (Qwen3.5: "System message must be at the
    beginning."; Mistral and Apertus: the roles after it must alternate). The messages lose
    their position: the price of a template that takes one.
    """
    systems = [m for m in messages if _is_system(m)]
    if not systems or (len(systems) == 1 and messages[0] is systems[0]):
        return messages
    rest = [m for m in messages if not _is_system(m)]
    texts = [text_only(m.get("content")) for m in systems]
    if all(text is not None for text in texts):
        return system_message(text for text in texts if text is not None) + rest
    parts: list[Any] = []
    for message in systems:  # a system message with other parts than text keeps them all
        if parts:
            parts.append({"type": "text", "text": TEXT_JOIN})
        parts += as_parts(message.get("content"))
    return [{"role": "system", "content": parts}, *rest]


def _is_system(message: object) -> bool:
    return isinstance(message, dict) and message.get("role") == "system"


def _mergeable(before: object, after: object) -> bool:
    if not isinstance(before, dict) or not isinstance(after, dict):
        return False
    role = before.get("role")
    if role != after.get("role"):
        return False
    if role == "user":
        return True
    # an assistant's text and then its calls, not a turn with calls and then another turn
    return role == "assistant" and not before.get("tool_calls")


def merge_same_role(messages: list[Any]) -> list[Any]:
    """Consecutive user messages, and an assistant message followed by another before any
    tool call, become one (templates that require alternating roles refuse them: Mistral,
    Gemma). Tool messages are never merged: each answers its own call."""
    if not any(_mergeable(a, b) for a, b in itertools.pairwise(messages)):
        return messages
    out: list[Any] = []
    for message in messages:
        if out and _mergeable(out[-1], message):
            merged = {**message, **out[-1]}
            merged["content"] = joined(out[-1].get("content"), message.get("content"))
            if message.get("tool_calls"):
                merged["tool_calls"] = message["tool_calls"]
            out[-1] = merged
        else:
            out.append(message)
    return out


def first_turn_user(messages: list[Any]) -> list[Any]:
    """A conversation whose first message after the system message is not the user's gets an
    empty user message before it: the templates that require a user turn first (Mistral,
    Gemma, Llama 3.1 with tools) then render it as an empty turn, and nothing else moves."""
    start = (
        1
        if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system"
        else 0
    )
    if start >= len(messages):
        return messages
    first = messages[start]
    if isinstance(first, dict) and first.get("role") == "user":
        return messages
    return [*messages[:start], {"role": "user", "content": ""}, *messages[start:]]


def system_into_user(messages: list[Any]) -> list[Any]:
    """For a template without a system role (Gemma 2: "System role not supported"): the system
    text goes at the start of the first user message, a blank line after it."""
    if not messages or not isinstance(messages[0], dict) or messages[0].get("role") != "system":
        return messages
    system, rest = messages[0], list(messages[1:])
    index = next(
        (i for i, m in enumerate(rest) if isinstance(m, dict) and m.get("role") == "user"), None
    )
    if index is None:
        return [{"role": "user", "content": system.get("content") or ""}, *rest]
    rest[index] = {
        **rest[index],
        "content": joined(system.get("content"), rest[index].get("content")),
    }
    return rest


def split_parallel_calls(messages: list[Any]) -> list[Any]:
    """For a template that takes one call per assistant message (Llama 3.x: "This model only
    supports single tool-calls at once!"): an earlier turn's parallel calls become one
    assistant message per call, each followed by its own tool result; the turn's text stays
    with the first call."""
    if not any(
        isinstance(m, dict) and m.get("role") == "assistant" and len(calls_of(m)) > 1
        for m in messages
    ):
        return messages
    out: list[Any] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if not isinstance(calls, list) or len(calls) < 2 or message.get("role") != "assistant":
            out.append(message)
            i += 1
            continue
        j = i + 1
        results = []
        while (
            j < len(messages)
            and isinstance(messages[j], dict)
            and messages[j].get("role") == "tool"
        ):
            results.append(messages[j])
            j += 1
        matched: list[Any] = []
        for n, call in enumerate(calls):
            content = message.get("content") if n == 0 else ""
            out.append({**message, "content": content, "tool_calls": [call]})
            call_id = call.get("id") if isinstance(call, dict) else None
            result = next(
                (r for r in results if r.get("tool_call_id") == call_id and r not in matched),
                None,
            )
            if result is not None:
                matched.append(result)
                out.append(result)
        out += [r for r in results if not any(r is m for m in matched)]
        i = j
    return out


def user_after_tools(messages: list[Any]) -> list[Any]:
    """For a template that counts turns as user, assistant, user, ... and skips tool calls and
    results while it counts (Mistral: "conversation roles must alternate"): a user message
    right after tool results has its text joined to the last result, a blank line between
    (clients such as Claude Code send that text in the same turn as the results). A user
    message with other parts than text cannot go there; it gets an empty assistant turn before
    it instead."""
    if not any(_tool_then_user(a, b) for a, b in itertools.pairwise(messages)):
        return messages
    out: list[Any] = []
    for message in messages:
        if out and _tool_then_user(out[-1], message):
            text = text_only(message.get("content"))
            if text is not None:
                out[-1] = {**out[-1], "content": joined(out[-1].get("content"), text)}
                continue
            out.append({"role": "assistant", "content": ""})
        out.append(message)
    return out


def _tool_then_user(before: object, after: object) -> bool:
    return (
        isinstance(before, dict)
        and isinstance(after, dict)
        and before.get("role") == "tool"
        and after.get("role") == "user"
    )


def tools_as_text(messages: list[Any]) -> list[Any]:
    """For a template that knows no tool calls and no tool role (Gemma 2: "Conversation roles
    must alternate"): an assistant's calls become its text, one JSON object a call
    (``{"name": ..., "arguments": ...}``) after what it said, and a tool result becomes a user
    message holding the result's text. The merge of consecutive roles runs after this."""
    if not any(isinstance(m, dict) and (m.get("role") == "tool" or calls_of(m)) for m in messages):
        return messages
    out: list[Any] = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
        elif message.get("role") == "tool":
            out.append({"role": "user", "content": message.get("content") or ""})
        elif calls_of(message):
            calls = [_call_text(call) for call in calls_of(message)]
            told = {k: v for k, v in message.items() if k != "tool_calls"}
            told["content"] = joined(message.get("content"), TEXT_JOIN.join(calls))
            out.append(told)
        else:
            out.append(message)
    return out


def calls_of(message: dict[str, Any]) -> list[Any]:
    """An assistant's calls, when ``tool_calls`` is the list it must be; a client's other
    value is left for the upstream to refuse."""
    calls = message.get("tool_calls")
    return calls if isinstance(calls, list) else []


def _call_text(call: object) -> str:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return orjson.dumps(call).decode()
    arguments = function.get("arguments")
    try:
        parsed = orjson.loads(arguments) if isinstance(arguments, str) and arguments else arguments
    except orjson.JSONDecodeError:
        parsed = arguments
    return orjson.dumps({"name": function.get("name"), "arguments": parsed or {}}).decode()
