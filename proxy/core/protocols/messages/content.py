"""Messages ``messages`` -> Chat Completions ``messages``, block by block, in order.

* ``text`` blocks join into the message's text; ``image`` blocks (base64 or URL source) become
  ``image_url`` parts, and then the content is a list of parts.
* An assistant's ``tool_use`` blocks become its ``tool_calls``, the input serialized to the
  arguments string; each ``tool_result`` block becomes a ``tool`` message with its
  ``tool_use_id``, its content's text joined and ``is_error`` kept as a prefix of the text
  (chat has no field for it). A user message's blocks keep their order: text before a tool
  result is a user message of its own before the ``tool`` message.
* ``thinking``/``redacted_thinking`` blocks of earlier turns are dropped: a chat upstream
  cannot take them back. ``system`` entries inside ``messages`` (Claude Code puts them there;
  vLLM rejects them, vllm#44000) are given back to the caller to merge into the leading
  system message.
* Whatever is dropped is named in ``dropped`` (the shell logs and counts it).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from proxy.core.errors import ClientRequestError, shown
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.dropped import Dropped

TEXT_JOIN: Final = "\n\n"
ERROR_PREFIX: Final = "Error: "


def block_text(content: object, dropped: Dropped, where: str) -> str:
    """The text of a string or a list of blocks (non-text blocks are dropped and named)."""
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if not isinstance(content, list):
        raise ClientRequestError(f"{where}: content must be a string or a list of blocks")
    texts: list[str] = []
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            raise ClientRequestError(f"{where}: every content block must be an object")
        _note_cache_control(block, dropped)
        kind = _kind(block, f"{where}[{position}]")
        if kind == "text":
            texts.append(_text_of(block, where))
        else:
            dropped.block(kind)
    return TEXT_JOIN.join(texts)


def convert_messages(messages: object, dropped: Dropped) -> tuple[list[JSONObject], list[str]]:
    """The chat messages, and the text of the system entries met inside ``messages``."""
    if not isinstance(messages, list):
        raise ClientRequestError("messages: must be a list")
    out: list[JSONObject] = []
    system: list[str] = []
    for position, message in enumerate(messages):
        where = f"messages[{position}]"
        if not isinstance(message, dict):
            raise ClientRequestError(f"{where}: must be an object")
        role = message.get("role")
        content = message.get("content")
        if role == "system":
            system.append(block_text(content, dropped, "system"))
        elif role == "assistant":
            out.extend(_assistant(content, dropped, where))
        elif role == "user":
            out.extend(_user(content, dropped, where))
        else:
            raise ClientRequestError(f"{where}.role: must be user or assistant, not {shown(role)}")
    return out, system


def _assistant(content: object, dropped: Dropped, where: str) -> list[JSONObject]:
    if isinstance(content, str):
        return [{"role": "assistant", "content": content}]
    texts: list[str] = []
    calls: list[JSONObject] = []
    for position, block in enumerate(_blocks(content, where)):
        _note_cache_control(block, dropped)
        kind = _kind(block, f"{where}.content[{position}]")
        if kind == "text":
            texts.append(_text_of(block, where))
        elif kind in ("tool_use", "server_tool_use"):
            calls.append(_tool_call(block, where))
        else:
            dropped.block(kind)
    message: JSONObject = {"role": "assistant", "content": TEXT_JOIN.join(texts) if texts else None}
    if calls:
        message["tool_calls"] = calls
    elif not texts:
        message["content"] = ""
    return [message]


def _user(content: object, dropped: Dropped, where: str) -> list[JSONObject]:
    if isinstance(content, str):
        return [{"role": "user", "content": content}]
    out: list[JSONObject] = []
    parts: list[JSONObject] = []
    for position, block in enumerate(_blocks(content, where)):
        _note_cache_control(block, dropped)
        kind = _kind(block, f"{where}.content[{position}]")
        if kind == "text":
            parts.append({"type": "text", "text": _text_of(block, where)})
        elif kind == "image":
            image = _image(block, dropped, f"{where}.content[{position}]")
            if image is not None:
                parts.append(image)
        elif kind == "tool_result":
            if parts:
                out.append(_user_message(parts))
                parts = []
            out.append(_tool_message(block, dropped, where))
        else:
            dropped.block(kind)
    if parts or not out:
        out.append(_user_message(parts))
    return out


def _user_message(parts: list[JSONObject]) -> JSONObject:
    """Text only: one string (what every chat server takes); with images: the parts."""
    if all(part["type"] == "text" for part in parts):
        return {"role": "user", "content": TEXT_JOIN.join(part["text"] for part in parts)}
    return {"role": "user", "content": parts}


def _tool_call(block: JSONObject, where: str) -> JSONObject:
    ident, name = block.get("id"), block.get("name")
    if not isinstance(ident, str) or not isinstance(name, str):
        raise ClientRequestError(f"{where}: a tool_use block needs a string id and name")
    given = block.get("input")
    if given is not None and not isinstance(given, dict):
        raise ClientRequestError(f"{where}: a tool_use block's input must be an object")
    arguments = orjson.dumps(given or {}).decode()
    return {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_message(block: JSONObject, dropped: Dropped, where: str) -> JSONObject:
    ident = block.get("tool_use_id")
    if not isinstance(ident, str):
        raise ClientRequestError(f"{where}: a tool_result block needs a string tool_use_id")
    text = block_text(block.get("content"), dropped, "tool_result")
    if block.get("is_error") is True:
        text = ERROR_PREFIX + text
    return {"role": "tool", "tool_call_id": ident, "content": text}


def _image(block: JSONObject, dropped: Dropped, where: str) -> JSONObject | None:
    source = block.get("source")
    if isinstance(source, dict):
        if source.get("type") == "base64":
            media_type, data = _string(source, "media_type", where), _string(source, "data", where)
            url = f"data:{media_type};base64,{data}"
            return {"type": "image_url", "image_url": {"url": url}}
        if source.get("type") == "url":
            return {"type": "image_url", "image_url": {"url": _string(source, "url", where)}}
    dropped.block("image")
    return None


def _string(source: JSONObject, key: str, where: str) -> str:
    value = source.get(key)
    if not isinstance(value, str):
        raise ClientRequestError(f"{where}.source.{key}: must be a string")
    return value


def _blocks(content: object, where: str) -> list[JSONObject]:
    if not isinstance(content, list) or not all(isinstance(b, dict) for b in content):
        raise ClientRequestError(f"{where}.content: must be a string or a list of blocks")
    return content


def _kind(block: JSONObject, where: str) -> str | None:
    """A block's ``type``: a string, or absent (an unknown block, dropped)."""
    kind = block.get("type")
    if kind is not None and not isinstance(kind, str):
        raise ClientRequestError(f"{where}.type: must be a string")
    return kind


def _text_of(block: JSONObject, where: str) -> str:
    text: Any = block.get("text")
    if not isinstance(text, str):
        raise ClientRequestError(f"{where}: a text block needs a string text")
    return text


def _note_cache_control(block: JSONObject, dropped: Dropped) -> None:
    if "cache_control" in block:
        dropped.field("cache_control")
