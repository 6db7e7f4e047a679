"""A Responses request for a server's own ``/v1/responses`` (native mode), with the tools
local servers cannot take sent as the ones they can, and their calls named back.

Local servers take ``function`` tools only: llama-server drops every other type without a
word (the model never sees them), LM Studio refuses the request (``tools.N.type``). So:

* a ``namespace`` of functions (Codex's ``multi_agent_v1``, its MCP servers) is flattened into
  functions named ``<namespace>__<function>``, as translate mode does;
* a ``custom`` (freeform) tool becomes a function with one string parameter ``input``;
* earlier turns' ``function_call`` items of a namespace, and ``custom_tool_call`` items and
  their outputs, are renamed and reshaped the same way, and so is a ``tool_choice`` naming one;
* hosted tools (``web_search``, ...) run on OpenAI's side: dropped;
* ``text`` without a ``format`` (Codex's ``verbosity``) is dropped: LM Studio refuses a
  ``text`` without ``format`` ("Required", ``text.format``), and no local server reads it;
* ``developer`` and ``system`` input messages (Codex sends two) join the ``instructions``,
  in order, a blank line between, and consecutive user messages become one: the server turns
  each into a chat message of its own, which templates refuse (Qwen3.5: "System message must
  be at the beginning."; Mistral: roles must alternate), as request_repairs/roles.py says.

:class:`NamesBack` then gives the client its own tools back in the server's stream, and
:func:`names_back` in its whole (non-streamed) answer, both through :func:`client_item`: a
flattened function's call as ``name`` + ``namespace``, a custom tool's call as a
``custom_tool_call`` item whose ``input`` is the function's ``input`` argument.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

import orjson

from proxy.core.errors import ClientRequestError
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.base import NativeStream
from proxy.core.protocols.responses.context import ToolKind, ToolRef
from proxy.core.protocols.responses.tools import ChatTools, convert_tools
from proxy.core.repairs import Repair
from proxy.core.sse import Event, RawBytes, SSEDecoder, encode_event

_TEXT_PARTS: Final = frozenset({"input_text", "output_text", "text"})
_SYSTEM: Final = frozenset({"system", "developer"})
_USER: Final = frozenset({"user"})
_ITEM_EVENTS: Final = ("response.output_item.added", "response.output_item.done")
_TERMINAL: Final = ("response.completed", "response.incomplete", "response.failed")


def native_request(body: JSONObject) -> tuple[JSONObject, Mapping[str, ToolRef], Counter[str]]:
    """The request to send, the flattened names -> the client's tools, and the repairs; the
    very body (and no names) when it needs none. A malformed request is sent as it came: the
    server is the one to refuse it."""
    repairs: Counter[str] = Counter()
    tools = body.get("tools")
    try:
        chat = convert_tools(tools) if isinstance(tools, list) else ChatTools()
    except ClientRequestError:  # a malformed request is the server's to refuse
        return body, {}, repairs
    out = dict(body)
    if isinstance(tools, list) and any(
        isinstance(t, dict) and t.get("type") != "function" for t in tools
    ):
        kinds = {
            t.get("type") for t in tools if isinstance(t, dict) and isinstance(t.get("type"), str)
        }
        if "namespace" in kinds:
            repairs[Repair.NAMESPACE_TOOL] = 1
        if "custom" in kinds:
            repairs[Repair.CUSTOM_TOOL] = 1
        if kinds - {"function", "namespace", "custom"}:
            repairs[Repair.HOSTED_TOOL] = 1
        out["tools"] = [{"type": "function", **t["function"]} for t in chat.tools]
    refs = dict(chat.refs)
    items = body.get("input")
    if isinstance(items, list) and refs:
        renamed = [_item(item, chat) for item in items]
        if any(a is not b for a, b in zip(renamed, items, strict=True)):
            out["input"] = renamed
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        name = choice.get("name")
        if isinstance(name, str) and (choice.get("namespace") or choice.get("type") == "custom"):
            out["tool_choice"] = {
                "type": "function",
                "name": chat.chat_name(name, choice.get("namespace")),
            }
    if isinstance(out.get("input"), list):
        _turns(out, repairs)
    text = body.get("text")
    if isinstance(text, dict) and text.get("format") is None:
        del out["text"]
        repairs[Repair.TEXT_WITHOUT_FORMAT] = 1
    if not repairs:
        return body, {}, repairs
    return out, refs, repairs


def _message_text(item: JSONObject) -> str | None:
    """A message item's text, when it holds only text."""
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, dict)
        and isinstance(p.get("type"), str)
        and p["type"] in _TEXT_PARTS
        and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _is_message(item: object, roles: frozenset[str]) -> bool:
    if not isinstance(item, dict) or item.get("type", "message") != "message":
        return False
    role = item.get("role")
    return isinstance(role, str) and role in roles


def _turns(out: JSONObject, repairs: Counter[str]) -> None:
    """System and developer messages into the instructions; consecutive user messages as one."""
    items: list[Any] = out["input"]
    systems = [i for i in items if _is_message(i, _SYSTEM) and _message_text(i) is not None]
    if systems:
        given = out.get("instructions")
        texts = [given] if isinstance(given, str) and given else []
        texts += [t for t in (_message_text(i) for i in systems) if t]
        out["instructions"] = "\n\n".join(texts)
        items = [i for i in items if not any(i is s for s in systems)]
        repairs[Repair.SYSTEM_NOT_FIRST] = 1
    merged: list[Any] = []
    for item in items:
        if merged and _is_message(item, _USER) and _is_message(merged[-1], _USER):
            before, now = _message_text(merged[-1]), _message_text(item)
            if before is not None and now is not None:
                merged[-1] = {**merged[-1], "content": f"{before}\n\n{now}"}
                repairs[Repair.SAME_ROLE_CONSECUTIVE] = 1
                continue
        merged.append(item)
    if systems or len(merged) != len(out["input"]):
        out["input"] = merged


def _item(item: object, tools: ChatTools) -> object:
    if not isinstance(item, dict):
        return item
    kind = item.get("type")
    if kind == "function_call" and item.get("namespace"):
        renamed = {k: v for k, v in item.items() if k != "namespace"}
        renamed["name"] = tools.chat_name(str(item.get("name")), item["namespace"])
        return renamed
    if kind == "custom_tool_call":
        call = {k: v for k, v in item.items() if k not in ("input", "type")}
        return {
            "type": "function_call",
            **call,
            "arguments": orjson.dumps({"input": item.get("input", "")}).decode(),
        }
    if kind == "custom_tool_call_output":
        return {**item, "type": "function_call_output"}
    return item


class NamesBack:
    """Wraps a native Responses stream: its function calls of flattened or custom tools
    become the client's own again (the event numbering kept dense)."""

    def __init__(
        self, inner: NativeStream, refs: Mapping[str, ToolRef], *, max_event_bytes: int
    ) -> None:
        self._inner = inner
        self.repairs = inner.repairs  # the inner stream's counter, counted as it goes
        self.usage = inner.usage
        self._refs = refs
        self._decoder = SSEDecoder(max_event_bytes=max_event_bytes)
        self._custom: dict[str, str] = {}  # item id -> the client's custom tool
        # events written minus events read so far: a custom call's argument deltas are left
        # out, and its arguments' end becomes two events; later numbers move by as much
        self._shift = 0

    @property
    def held_bytes(self) -> int:
        """What the inner stream holds (the events it writes reach this one whole)."""
        return self._inner.held_bytes

    @property
    def over(self) -> bool:
        return self._inner.over

    def feed(self, chunk: bytes) -> list[bytes]:
        return self._rewrite(self._decoder, self._inner.feed(chunk), final=False)

    def close(self, *, complete: bool) -> list[bytes]:
        return self._rewrite(self._decoder, self._inner.close(complete=complete), final=True)

    def _rewrite(self, decoder: SSEDecoder, pieces: list[bytes], *, final: bool) -> list[bytes]:
        out: list[bytes] = []
        events: list[Event | RawBytes] = []
        for piece in pieces:
            events += decoder.feed(piece)
        if final:
            events += decoder.close()
        for event in events:
            if isinstance(event, RawBytes) or event.data is None:
                out.append(event.raw)
                continue
            try:
                payload = orjson.loads(event.data)
            except orjson.JSONDecodeError:
                out.append(event.raw)
                continue
            if not isinstance(payload, dict):
                out.append(event.raw)
                continue
            out += self._event(payload, event)
        return out

    def _event(self, payload: JSONObject, event: Event) -> list[bytes]:
        kind = payload.get("type")
        if kind in _ITEM_EVENTS and isinstance(payload.get("item"), dict):
            item = self._client_item(payload["item"])
            if item is payload["item"] and not self._shift:
                return [event.raw]
            payload["item"] = item
        elif kind in _TERMINAL and isinstance(payload.get("response"), dict):
            client_output(payload["response"], self._refs)
        elif kind == "response.function_call_arguments.delta" and self._is_custom(payload):
            self._shift -= 1
            return []
        elif kind == "response.function_call_arguments.done" and self._is_custom(payload):
            value = _input_of(payload.get("arguments"))
            base = {k: v for k, v in payload.items() if k not in ("arguments", "type", "name")}
            delta = self._frame(
                {**base, "type": "response.custom_tool_call_input.delta", "delta": value}
            )
            self._shift += 1
            return [
                delta,
                self._frame(
                    {**base, "type": "response.custom_tool_call_input.done", "input": value}
                ),
            ]
        elif not self._shift:
            return [event.raw]
        return [self._frame(payload)]

    def _is_custom(self, payload: JSONObject) -> bool:
        item_id = payload.get("item_id")
        return isinstance(item_id, str) and item_id in self._custom

    def _frame(self, payload: JSONObject) -> bytes:
        number = payload.get("sequence_number")
        if isinstance(number, int) and self._shift:
            payload = {**payload, "sequence_number": number + self._shift}
        return encode_event(orjson.dumps(payload), event=str(payload.get("type")))

    def _client_item(self, item: object) -> object:
        named = client_item(item, self._refs)
        if isinstance(named, dict) and named is not item:
            # a custom call's argument events become custom_tool_call_input ones
            custom = named.get("id") if named["type"] == "custom_tool_call" else None
            if isinstance(custom, str):
                self._custom[custom] = named["name"]
        return named


def names_back(body: bytes, refs: Mapping[str, ToolRef]) -> bytes:
    """A whole (non-streamed) Response with the client's own tools back, as :class:`NamesBack`
    gives them in a stream; the very bytes when no call needs it (or it is no Response)."""
    if not refs:
        return body
    try:
        response = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body
    if not isinstance(response, dict) or not client_output(response, refs):
        return body
    return orjson.dumps(response)


def client_output(response: JSONObject, refs: Mapping[str, ToolRef]) -> bool:
    """A Response object's ``output`` items named back in place; whether any changed."""
    output = response.get("output")
    if not isinstance(output, list):
        return False
    named = [client_item(item, refs) for item in output]
    if all(a is b for a, b in zip(named, output, strict=True)):
        return False
    response["output"] = named
    return True


def client_item(item: object, refs: Mapping[str, ToolRef]) -> object:
    """An output item as the client's tools name it: a flattened function's call as ``name`` +
    ``namespace``, a custom tool's as a ``custom_tool_call``; the very item otherwise."""
    if not isinstance(item, dict) or item.get("type") != "function_call":
        return item
    ref = refs.get(str(item.get("name")))
    if ref is None:
        return item
    if ref.kind is ToolKind.CUSTOM:
        custom = {k: v for k, v in item.items() if k not in ("arguments", "type")}
        return {
            "type": "custom_tool_call",
            **custom,
            "name": ref.name,
            "input": _input_of(item.get("arguments")),
        }
    return {**item, "name": ref.name, "namespace": ref.namespace}


def _input_of(arguments: object) -> str:
    """A custom tool's input: the ``input`` of the function's arguments (the text as it came
    when they are not such an object)."""
    if not isinstance(arguments, str):
        return ""
    try:
        parsed = orjson.loads(arguments) if arguments else {}
    except orjson.JSONDecodeError:
        return arguments
    value = parsed.get("input") if isinstance(parsed, dict) else None
    return value if isinstance(value, str) else arguments if arguments else ""
