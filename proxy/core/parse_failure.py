"""llama-server's parser failure, with the model's calls inside (issue 24 item 8).

Current llama-server answers a generation its own tool-call parser cannot read with
``Failed to parse input at pos N: <the model's text>`` (llama.cpp#20532, #20761, #24644): as a
500 before the stream, or as an error event inside it, on every endpoint. When that text
holds complete tool-call blocks in a dialect the proxy knows (proxy/core/markup, every dialect),
the answer is those calls instead of the error (``parse-failure-recovered``); when it holds
none, or a block that is broken or cut, the error goes on as it came. An upstream turns this
off with ``recover_parse_failures = false``.

This module is the one place every path asks: the chat normalizer and the native repairers
for an error inside a stream (``recover``), the shell for a 500 before it, which it answers
as a chat stream or completion of the calls (``chat_stream``, ``chat_completion``) that then
goes through the same repair or translation as any chat answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from proxy.core.errors import DialectError
from proxy.core.jsonvalues import JSONObject, loads
from proxy.core.markup import build_extractor, check_names
from proxy.core.markup.base import CallArgs, CallClose, CallOpen, Segment, Text

_FAILURE: Final = re.compile(r"Failed to parse input at pos \d+: ", re.S)
_EVERY_DIALECT: Final = check_names(["auto"])


@dataclass(frozen=True, slots=True)
class RecoveredCall:
    name: str
    arguments: str  #: JSON text, as the markup gave it
    id: str | None = None  #: when the markup carried one (Kimi's ``functions.NAME:N``)


@dataclass(frozen=True, slots=True)
class Recovered:
    """What the model said: its text around the blocks, and its calls."""

    text: str
    calls: tuple[RecoveredCall, ...]


def model_text(message: object) -> str | None:
    """The model's text an error message carries, or None when it is no parser failure."""
    if not isinstance(message, str):
        return None
    found = _FAILURE.search(message)
    return message[found.end() :] if found is not None else None


def error_message(error: object) -> object:
    """The message of an error object in any of the shapes servers send it."""
    if isinstance(error, dict):
        inner = error.get("error")
        if isinstance(inner, dict):
            return inner.get("message")
        return error.get("message")
    return None


def recover(message: object, tools: Sequence[Any] = ()) -> Recovered | None:
    """The calls in a parser failure's text: every block complete and whole, at least one;
    None otherwise (the error then goes on as it came). ``tools``: the request's, in chat
    form, for the dialects that type untyped parameter values."""
    text = model_text(message)
    if text is None:
        return None
    extractor = build_extractor(_EVERY_DIALECT, list(tools))
    if extractor is None:
        return None
    try:
        segments = [*extractor.feed(text), *extractor.close()]
    except DialectError:
        return None
    return _calls(segments)


def _calls(segments: list[Segment]) -> Recovered | None:
    said: list[str] = []
    calls: list[RecoveredCall] = []
    name: str | None = None
    ident: str | None = None
    args: list[str] = []
    for segment in segments:
        match segment:
            case Text(text=piece):
                if name is not None:
                    return None  # text inside a call: not a block the proxy can trust
                said.append(piece)
            case CallOpen(name=opened, id=opened_id):
                name, ident, args = opened, opened_id, []
            case CallArgs(text=piece):
                if name is None:
                    return None
                args.append(piece)
            case CallClose(error=error):
                if name is None or error is not None:
                    return None  # broken or cut: the error goes on
                arguments = "".join(args) or "{}"
                if not isinstance(loads(arguments), dict):
                    return None
                calls.append(RecoveredCall(name, arguments, ident))
                name = None
    if name is not None or not calls:
        return None
    return Recovered("".join(said).strip(), tuple(calls))


def tools_of(request: object) -> list[Any]:
    """A request's tools as the dialects read them (chat's shape; Responses' and Anthropic's
    flat ones too: a dialect reads a tool's ``name`` and parameters)."""
    tools = request.get("tools") if isinstance(request, dict) else None
    return list(tools) if isinstance(tools, list) else []


def chat_chunks(
    recovered: Recovered, *, model: str, new_id: Callable[[], str], role: bool = True
) -> list[JSONObject]:
    """The chat chunks of a stream that says what ``recovered`` says: the role (unless
    ``role`` is false: the stream gave it already) and the text, each call whole with an id,
    then the ``tool_calls`` finish."""
    envelope: JSONObject = {
        "id": "chatcmpl-" + new_id(),
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
    }
    delta: JSONObject = {"role": "assistant"} if role else {}
    if recovered.text:
        delta["content"] = recovered.text
    chunks: list[JSONObject] = []
    if delta:
        chunks.append(
            {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        )
    for index, call in enumerate(recovered.calls):
        entry = {
            "index": index,
            "id": call.id or "call_" + new_id(),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        delta = {"tool_calls": [entry]}
        chunks.append(
            {**envelope, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}
        )
    finish = {"index": 0, "delta": {}, "finish_reason": "tool_calls"}
    chunks.append({**envelope, "choices": [finish]})
    return chunks


def chat_stream(recovered: Recovered, *, model: str, new_id: Callable[[], str]) -> bytes:
    """The chat event stream of ``recovered``, ``[DONE]`` at its end (a 500 answered so)."""
    events = [
        b"data: " + orjson.dumps(c) + b"\n\n"
        for c in chat_chunks(recovered, model=model, new_id=new_id)
    ]
    return b"".join([*events, b"data: [DONE]\n\n"])


def chat_completion(recovered: Recovered, *, model: str, new_id: Callable[[], str]) -> bytes:
    """The whole chat completion of ``recovered`` (a non-streamed request's 500 answered so)."""
    calls = [
        {
            "id": call.id or "call_" + new_id(),
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments},
        }
        for call in recovered.calls
    ]
    message = {"role": "assistant", "content": recovered.text or None, "tool_calls": calls}
    return orjson.dumps(
        {
            "id": "chatcmpl-" + new_id(),
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
        }
    )
