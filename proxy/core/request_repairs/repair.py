"""The request repairer: a chat request in, the request every mainstream template accepts and
the repair kinds applied out (proxy/core/repairs.py, the request side).

The rules every template needs run on every request they apply to (translated, and chat
requests under ``request_repairs = "auto"``); the family rules run where the upstream's
template needs them (:class:`TemplateNeeds`). A rule changes only what it names: unknown
fields, the order of other keys and the tool definitions stay as they came, and a request no
rule applies to comes back as the very object it was, so the shell can forward its bytes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from proxy.core.repairs import Repair
from proxy.core.request_repairs import ids, roles
from proxy.core.request_repairs.content import text_only
from proxy.core.request_repairs.needs import GENERIC, TemplateNeeds
from proxy.core.request_repairs.schemas import single_type, wrapped

JSONObject = dict[str, Any]
Messages = list[Any]


@dataclass(frozen=True, slots=True)
class RepairedRequest:
    body: JSONObject  #: the request to send (the very object given when nothing changed)
    repairs: Counter[str] = field(default_factory=Counter)  #: kind -> 1, once per request


def _texts_as_strings(messages: Messages) -> Messages:
    """Part lists holding only text become one string: a template that takes a list takes a
    string too, and many take only strings (``message.content + ...``, ``'</think>' in
    message.content``)."""
    out: Messages | None = None
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("content"), list):
            continue
        text = text_only(message["content"])
        if text is None:
            continue
        if out is None:
            out = list(messages)
        out[i] = {**message, "content": text}
    return messages if out is None else out


def _call_content(messages: Messages) -> Messages:
    """An assistant message with tool calls has ``content: ""``, not null or nothing: templates
    test and join it as a string (Qwen3: ``'</think>' in content``; Phi, Granite: ``+``)."""
    out: Messages | None = None
    for i, message in enumerate(messages):
        if (
            isinstance(message, dict)
            and message.get("role") == "assistant"
            and message.get("tool_calls")
            and message.get("content") is None
        ):
            if out is None:
                out = list(messages)
            out[i] = {**message, "content": ""}
    return messages if out is None else out


def _mistral_ids(messages: Messages) -> Messages:
    seen: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        for call in roles.calls_of(message):
            if isinstance(call, dict) and isinstance(call.get("id"), str):
                seen.append(call["id"])
        if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
            seen.append(message["tool_call_id"])
    mapping = ids.id_map(seen)
    if not mapping:
        return messages
    out: Messages = []
    for message in messages:
        if not isinstance(message, dict):
            out.append(message)
            continue
        calls = message.get("tool_calls")
        if isinstance(calls, list) and any(_mapped(c, "id", mapping) for c in calls):
            message = {
                **message,
                "tool_calls": [
                    {**c, "id": mapping[c["id"]]} if _mapped(c, "id", mapping) else c for c in calls
                ],
            }
        if message.get("role") == "tool" and _mapped(message, "tool_call_id", mapping):
            message = {**message, "tool_call_id": mapping[message["tool_call_id"]]}
        out.append(message)
    return out


def _mapped(obj: object, key: str, mapping: dict[str, str]) -> bool:
    value = obj.get(key) if isinstance(obj, dict) else None
    return isinstance(value, str) and value in mapping


#: the message rules, in the order they run: (kind, rule, needed by this template?)
_RULES: tuple[
    tuple[Repair, Callable[[Messages], Messages], Callable[[TemplateNeeds], bool]], ...
] = (
    (Repair.TOOL_ROLE_UNSUPPORTED, roles.tools_as_text, lambda n: n.no_tool_role),
    (Repair.DEVELOPER_ROLE, roles.developer_as_system, lambda needs: True),
    (Repair.SYSTEM_NOT_FIRST, roles.merge_system, lambda needs: True),
    (Repair.TEXT_PARTS_AS_LIST, _texts_as_strings, lambda needs: True),
    (Repair.SAME_ROLE_CONSECUTIVE, roles.merge_same_role, lambda needs: True),
    (Repair.CALL_CONTENT_NULL, _call_content, lambda needs: True),
    (Repair.FIRST_TURN_NOT_USER, roles.first_turn_user, lambda needs: True),
    (Repair.PARALLEL_CALLS_UNSUPPORTED, roles.split_parallel_calls, lambda n: n.single_calls),
    (Repair.USER_AFTER_TOOL_RESULTS, roles.user_after_tools, lambda n: n.alternating_turns),
    (Repair.CALL_ID_NOT_MISTRAL, _mistral_ids, lambda needs: needs.mistral_ids),
    (Repair.SYSTEM_ROLE_UNSUPPORTED, roles.system_into_user, lambda n: n.no_system_role),
)


def repair_request(body: JSONObject, needs: TemplateNeeds = GENERIC) -> RepairedRequest:
    """``body`` as every mainstream template (and the upstream's, per ``needs``) accepts it."""
    repairs: Counter[str] = Counter()
    messages = body.get("messages")
    fixed = dict(body)
    if isinstance(messages, list):
        current: Messages = messages
        for kind, rule, needed in _RULES:
            if needed(needs):
                after = rule(current)
                if after is not current:
                    repairs[kind] = 1
                    current = after
        fixed["messages"] = current
    if needs.schema_lookup or needs.schema_single_types:
        tools = _simple_tools(body.get("tools"), needs, repairs)
        if tools is not body.get("tools"):
            fixed["tools"] = tools
    if not repairs:
        return RepairedRequest(body)
    return RepairedRequest(fixed, repairs)


def _simple_tools(tools: object, needs: TemplateNeeds, repairs: Counter[str]) -> object:
    """Each function's parameters as the template's type mapping reads them (schemas.py)."""
    if not isinstance(tools, list):
        return tools
    out = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        parameters = function.get("parameters") if isinstance(function, dict) else None
        fixed = _parameters(parameters, needs, repairs)
        if fixed is parameters or not isinstance(tool, dict) or not isinstance(function, dict):
            out.append(tool)
        else:
            out.append({**tool, "function": {**function, "parameters": fixed}})
    return tools if all(a is b for a, b in zip(out, tools, strict=True)) else out


def _parameters(parameters: object, needs: TemplateNeeds, repairs: Counter[str]) -> object:
    if not isinstance(parameters, dict):
        return parameters
    fixed: dict[str, Any] = parameters
    properties = fixed.get("properties")
    if needs.schema_single_types and isinstance(properties, dict):
        typed = {name: single_type(value, repairs) for name, value in properties.items()}
        if any(typed[name] is not properties[name] for name in properties):
            fixed = {**fixed, "properties": typed}
    if needs.schema_lookup:
        fixed = wrapped(fixed, repairs, arrays=needs.schema_arrays)
    return fixed
