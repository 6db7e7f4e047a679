"""A Responses request's ``instructions`` and ``input`` items as chat ``messages``, in order.

* Messages (with or without ``type: "message"``) keep their role, ``developer`` becoming
  ``system`` (chat servers' templates know only the older name). Text parts (``input_text``,
  ``output_text``, ``refusal``) join into one string; a user message with images keeps chat
  content parts.
* ``function_call`` and ``custom_tool_call`` items become the ``tool_calls`` of one assistant
  message, merged with the assistant text right before them (chat templates expect the text
  and the calls of a turn in one message); their outputs become ``tool`` messages with the
  same ``call_id``, so the upstream's id maps back.
* ``reasoning`` items from earlier turns, and every other item a chat upstream cannot take,
  are dropped and named (``input.<type>``).
"""

from __future__ import annotations

import orjson

from proxy.core.errors import ClientRequestError, shown
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.responses.tools import ChatTools

_TEXT_PARTS = {"input_text": "text", "output_text": "text", "text": "text", "refusal": "refusal"}
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}


def convert_input(
    instructions: object, items: object, tools: ChatTools, dropped: list[str]
) -> list[JSONObject]:
    messages: list[JSONObject] = []
    if isinstance(instructions, str) and instructions:
        messages.append({"role": "system", "content": instructions})
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
        return messages
    if not isinstance(items, list):
        raise ClientRequestError("'input' must be a string or an array of items")
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise ClientRequestError("each entry of 'input' must be an object")
        kind = item.get("type", "message")
        if not isinstance(kind, str):
            raise ClientRequestError(f"input[{position}].type: must be a string")
        if kind == "message":
            messages.append(_message(item, dropped, f"input[{position}]"))
        elif kind in ("function_call", "custom_tool_call"):
            _assistant_turn(messages)["tool_calls"].append(_call(item, tools))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": _call_id(item),
                    "content": _text(item.get("output")),
                }
            )
        else:
            dropped.append(f"input.{kind}")
    return messages


def _message(item: JSONObject, dropped: list[str], where: str) -> JSONObject:
    given = item.get("role", "")
    role = _ROLES.get(given) if isinstance(given, str) else None
    if role is None:
        raise ClientRequestError(f"{where}.role: unknown input message role {shown(given)}")
    content = item.get("content")
    if isinstance(content, str):
        return {"role": role, "content": content}
    if not isinstance(content, list):
        raise ClientRequestError("an input message's 'content' must be a string or an array")
    parts: list[JSONObject] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if not isinstance(kind, str):
            kind = None
        if kind in _TEXT_PARTS and isinstance(part.get(_TEXT_PARTS[kind]), str):
            parts.append({"type": "text", "text": part[_TEXT_PARTS[kind]]})
        elif kind == "input_image" and role == "user" and isinstance(part.get("image_url"), str):
            image: JSONObject = {"url": part["image_url"]}
            if isinstance(part.get("detail"), str):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        else:
            dropped.append(f"input.content.{kind or 'unknown'}")
    if all(part["type"] == "text" for part in parts):
        return {"role": role, "content": "".join(part["text"] for part in parts)}
    return {"role": role, "content": parts}


def _assistant_turn(messages: list[JSONObject]) -> JSONObject:
    """The assistant message the next call belongs to: the latest one when nothing came after it."""
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "assistant" and isinstance(last["content"], str | None):
        last.setdefault("tool_calls", [])
        return last
    message: JSONObject = {"role": "assistant", "content": None, "tool_calls": []}
    messages.append(message)
    return message


def _call(item: JSONObject, tools: ChatTools) -> JSONObject:
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise ClientRequestError(f"a {item.get('type')} input item has no name")
    if item.get("type") == "custom_tool_call":
        arguments = orjson.dumps({"input": _text(item.get("input"))}).decode()
    else:
        raw = item.get("arguments")
        arguments = raw if isinstance(raw, str) else orjson.dumps(raw or {}).decode()
    return {
        "id": _call_id(item),
        "type": "function",
        "function": {"name": tools.chat_name(name, item.get("namespace")), "arguments": arguments},
    }


def _call_id(item: JSONObject) -> str:
    call_id = item.get("call_id")
    if not isinstance(call_id, str) or not call_id:
        raise ClientRequestError(f"a {item.get('type')} input item has no call_id")
    return call_id


def _text(value: object) -> str:
    """A tool output or custom input as text: a string, or the text of its parts."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(
            part["text"]
            for part in value
            if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return "" if value is None else orjson.dumps(value).decode()
