"""A Messages request -> the Chat Completions request sent to a chat-only upstream.

The mapping (docs/messages.md has it as a table):

* ``system`` (a string or text blocks) is the first message, and ``system`` entries inside
  ``messages`` are merged into it, in order, rather than left in place.
* ``messages``: see :mod:`.content`.
* ``tools``: ``input_schema`` becomes the function's ``parameters``; server tools (a ``type``
  such as ``web_search_20250305`` and no ``input_schema``) are dropped: a chat upstream cannot
  run them and vLLM rejects them (vllm#46790).
* ``tool_choice``: ``auto``/``any``/``tool``/``none`` -> ``auto``/``required``/the named
  function/``none``; ``disable_parallel_tool_use`` -> ``parallel_tool_calls: false``.
* ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stream`` as they are;
  ``stop_sequences`` -> ``stop``. ``thinking: {type: "enabled", budget_tokens}`` ->
  ``reasoning_effort`` by budget (``adaptive`` and ``disabled`` leave the server's default).
* Everything else a chat upstream cannot take (``metadata``, ``context_management``,
  ``output_config``, ``cache_control`` marks, ...) is dropped and named.

``stream_options``, ``model_map`` and ``max_tokens_limit`` are the shell's (it applies them to
every translated request alike).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from proxy.core.errors import ClientRequestError, shown
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.content import block_text, convert_messages
from proxy.core.protocols.messages.dropped import Dropped
from proxy.core.request_repairs.roles import system_message

_COPIED: Final = ("max_tokens", "temperature", "top_p", "top_k", "stream")
_HANDLED: Final = frozenset(
    {*_COPIED, "model", "system", "messages", "tools", "tool_choice", "stop_sequences", "thinking"}
)
# reasoning_effort by thinking budget: below 4k tokens "low", below 16k "medium", else "high"
_EFFORT: Final = ((4096, "low"), (16384, "medium"))


@dataclass(frozen=True, slots=True)
class MessagesContext:
    """What the encoder needs of the client's request."""

    model: str
    stop_sequences: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Translated:
    body: JSONObject
    context: MessagesContext
    dropped: tuple[str, ...]


def translate_request(body: JSONObject) -> Translated:
    """The chat request for ``body``; a request that cannot be a Messages request is a 400."""
    dropped = Dropped()
    model = body.get("model")
    if not isinstance(model, str):
        raise ClientRequestError("model: a string is required")
    if body.get("stream") is not None and not isinstance(body["stream"], bool):
        raise ClientRequestError("stream: must be a boolean")
    messages, inner_system = convert_messages(body.get("messages"), dropped)
    system = _system(body.get("system"), inner_system, dropped)
    chat: JSONObject = {"model": model, "messages": system + messages}
    for key in _COPIED:
        if key in body:
            chat[key] = body[key]
    stops = _stop_sequences(body.get("stop_sequences"))
    if stops:
        chat["stop"] = list(stops)
    tools = convert_tools(body.get("tools"), dropped)
    if tools:
        chat["tools"] = tools
    _tool_choice(body.get("tool_choice"), chat, dropped)
    effort = _reasoning_effort(body.get("thinking"))
    if effort is not None:
        chat["reasoning_effort"] = effort
    elif "thinking" in body:
        dropped.field("thinking")
    for key in body:
        if key not in _HANDLED:
            dropped.field(key)
    return Translated(chat, MessagesContext(model, stops), dropped.names)


def convert_tools(tools: object, dropped: Dropped | None = None) -> list[JSONObject]:
    """Messages tools as chat ``tools``, the ones without an ``input_schema`` left out."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise ClientRequestError("tools: must be a list")
    out: list[JSONObject] = []
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict) or not isinstance(tool.get("name"), str) or not tool["name"]:
            raise ClientRequestError(f"tools[{position}].name: every tool needs a string name")
        schema = tool.get("input_schema")
        if schema is None:  # a server tool (web_search_20250305, ...): run on Anthropic's side
            if dropped is not None:
                dropped.tool(tool.get("type"))
            continue
        if not isinstance(schema, dict):
            raise ClientRequestError(f"tools[{position}].input_schema: must be an object")
        if dropped is not None and "cache_control" in tool:
            dropped.field("cache_control")
        function: JSONObject = {"name": tool["name"], "parameters": schema}
        if isinstance(tool.get("description"), str):
            function["description"] = tool["description"]
        out.append({"type": "function", "function": function})
    return out


def _system(system: object, inner: list[str], dropped: Dropped) -> list[JSONObject]:
    """The one leading system message, by the request repairs' own rule (system_message)."""
    texts = [block_text(system, dropped, "system")] if system is not None else []
    return system_message([*texts, *inner])


def _stop_sequences(stops: object) -> tuple[str, ...]:
    if stops is None:
        return ()
    if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
        raise ClientRequestError("stop_sequences: must be a list of strings")
    return tuple(stops)


def _tool_choice(choice: object, chat: JSONObject, dropped: Dropped) -> None:
    if choice is None:
        return
    if not isinstance(choice, dict):
        raise ClientRequestError("tool_choice: must be an object")
    kind = choice.get("type")
    if kind == "auto":
        chat["tool_choice"] = "auto"
    elif kind == "any":
        chat["tool_choice"] = "required"
    elif kind == "none":
        chat["tool_choice"] = "none"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise ClientRequestError(f"tool_choice: unknown type {shown(kind)}")
    if choice.get("disable_parallel_tool_use") is True and kind != "none":
        chat["parallel_tool_calls"] = False


def _reasoning_effort(thinking: object) -> str | None:
    if not isinstance(thinking, dict) or thinking.get("type") != "enabled":
        return None
    budget = thinking.get("budget_tokens")
    if not isinstance(budget, int) or isinstance(budget, bool):
        return "medium"
    return next((effort for limit, effort in _EFFORT if budget < limit), "high")
