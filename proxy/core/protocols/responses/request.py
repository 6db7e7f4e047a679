"""A Responses API request as the Chat Completions request a chat-only upstream can serve.

Only fields with a chat meaning are sent; every other field is dropped and named, so the shell
can log and count it (the chat request must not carry keys a strict server rejects). The
model is forwarded as the client named it (the shell applies ``model_map``); the shell also
adds ``stream_options.include_usage`` and caps ``max_tokens``. ``previous_response_id`` (and
``conversation``) would need the state of earlier responses, which a stateless proxy has not:
a 400 says so.
"""

from __future__ import annotations

from typing import Final

from proxy.core.errors import ClientRequestError
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.responses.context import ResponsesContext
from proxy.core.protocols.responses.dropped import bounded
from proxy.core.protocols.responses.input_items import convert_input
from proxy.core.protocols.responses.tools import convert_tool_choice, convert_tools

#: Responses fields with the same name and meaning in chat
_SAME: Final = ("model", "stream", "temperature", "top_p", "parallel_tool_calls", "stop", "user")
#: fields read by the mapping itself
_MAPPED: Final = frozenset(
    {
        *_SAME,
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "max_output_tokens",
        "reasoning",
        "text",
    }
)
#: fields of the client's request a Response object echoes back, with the API's defaults
_ECHO: Final[dict[str, object]] = {
    "instructions": None,
    "max_output_tokens": None,
    "parallel_tool_calls": True,
    "temperature": None,
    "tool_choice": "auto",
    "tools": [],
    "top_p": None,
    "metadata": {},
}
_STATEFUL: Final = ("previous_response_id", "conversation")


def translate_request(body: JSONObject) -> tuple[JSONObject, ResponsesContext, tuple[str, ...]]:
    """The chat request, the encoder's context, and the names of the fields and tools dropped.

    Raises :class:`ClientRequestError` (a 400) for a request that cannot be served."""
    for key in _STATEFUL:
        if body.get(key) is not None:
            raise ClientRequestError(
                f"'{key}' is not supported: this proxy is stateless and keeps no earlier"
                " responses; send the whole conversation in 'input' (as with store: false)"
            )
    if "input" not in body:
        raise ClientRequestError("'input' is required")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise ClientRequestError("'stream' must be a boolean")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise ClientRequestError("'instructions' must be a string")
    dropped: list[str] = []
    tools = convert_tools(body.get("tools"))
    if tools.collision is not None:
        raise ClientRequestError(tools.collision)
    dropped += tools.dropped
    chat: JSONObject = {
        "model": body.get("model"),
        "messages": convert_input(body.get("instructions"), body["input"], tools, dropped),
    }
    for key in _SAME[1:]:
        if body.get(key) is not None:
            chat[key] = body[key]
    if tools.tools:
        chat["tools"] = tools.tools
    else:
        chat.pop("parallel_tool_calls", None)
    choice, dropped_choice = convert_tool_choice(body.get("tool_choice"), tools)
    if choice is not None:
        chat["tool_choice"] = choice
    if dropped_choice is not None:
        dropped.append(dropped_choice)
    limit = body.get("max_output_tokens")
    if limit is not None:
        if isinstance(limit, bool) or not isinstance(limit, int | float | str):
            raise ClientRequestError("'max_output_tokens' must be a number")
        chat["max_tokens"] = limit
    _reasoning(body.get("reasoning"), chat, dropped)
    _text_format(body.get("text"), chat, dropped)
    dropped += sorted(key for key in body if key not in _MAPPED and key not in _STATEFUL)
    if chat["model"] is None:
        del chat["model"]
    model = body.get("model")
    context = ResponsesContext(
        model=model if isinstance(model, str) else None,
        tools=tools.refs,
        echo={key: body.get(key, default) for key, default in _ECHO.items()},
    )
    return chat, context, tuple(bounded(name) for name in dropped)


def _reasoning(reasoning: object, chat: JSONObject, dropped: list[str]) -> None:
    if not isinstance(reasoning, dict):
        return
    for key, value in reasoning.items():
        if key == "effort" and isinstance(value, str):
            chat["reasoning_effort"] = value
        elif value is not None:
            dropped.append(f"reasoning.{key}")


def _text_format(text: object, chat: JSONObject, dropped: list[str]) -> None:
    """``text.format`` is chat's ``response_format``; verbosity has no chat meaning."""
    if not isinstance(text, dict):
        return
    for key, value in text.items():
        if key != "format" and value is not None:
            dropped.append(f"text.{key}")
    fmt = text.get("format")
    if not isinstance(fmt, dict) or fmt.get("type") in (None, "text"):
        return
    if fmt.get("type") == "json_schema":
        schema = {k: fmt[k] for k in ("name", "schema", "strict", "description") if k in fmt}
        chat["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif fmt.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}
    else:
        dropped.append(f"text.format.{fmt.get('type')}")
