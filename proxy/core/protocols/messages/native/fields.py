"""Field repairs of single native Messages events: each fixes what one server or gateway drops.

Every function edits the event's data in place (existing keys keep their place; a restored key
goes after them, as the re-encoding rule says) and returns the repair kinds it made.
"""

from __future__ import annotations

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.errors import error_object, stream_error_type
from proxy.core.repairs import Repair

# the empty value each block type starts with; a gateway that drops empty fields loses them
_BLOCK_FIELDS = {
    "text": (("text", ""),),
    "thinking": (("thinking", ""), ("signature", "")),
    "tool_use": (("input", {}),),
    "server_tool_use": (("input", {}),),
}
_DELTA_FIELDS = {
    "text_delta": "text",
    "thinking_delta": "thinking",
    "input_json_delta": "partial_json",
    "signature_delta": "signature",
}


def block_start(block: JSONObject) -> list[Repair]:
    repairs: list[Repair] = []
    for key, empty in _BLOCK_FIELDS.get(str(block.get("type")), ()):
        if key not in block:
            block[key] = empty
            if key == "input":
                repairs.append(Repair.TOOL_USE_INPUT_MISSING)
            elif key == "signature":
                repairs.append(Repair.THINKING_SIGNATURE_MISSING)
            else:
                repairs.append(Repair.EMPTY_FIELD_DROPPED)
    return repairs


def delta(payload: JSONObject) -> list[Repair]:
    """A delta's dropped empty text or fragment restored."""
    body = payload.get("delta")
    if not isinstance(body, dict):
        return []
    key = _DELTA_FIELDS.get(str(body.get("type")))
    if key is None or isinstance(body.get(key), str):
        return []
    body[key] = ""
    return [Repair.EMPTY_FIELD_DROPPED]


def message_start(payload: JSONObject) -> list[Repair]:
    message = payload.get("message")
    if not isinstance(message, dict):
        return []
    repairs: list[Repair] = []
    for key in ("stop_reason", "stop_sequence"):
        if message.get(key) == "":
            message[key] = None
            repairs.append(Repair.STOP_REASON_EMPTY)
    if not isinstance(message.get("content"), list):
        message["content"] = []
        repairs.append(Repair.EMPTY_FIELD_DROPPED)
    usage = message.get("usage")
    if not isinstance(usage, dict):
        message["usage"] = usage = {}
    for key in ("input_tokens", "output_tokens"):
        if not isinstance(usage.get(key), int):
            usage[key] = 0
            repairs.append(Repair.EMPTY_FIELD_DROPPED)
    return repairs


def is_error(payload: JSONObject, event_name: str | None) -> bool:
    """An upstream error: Anthropic's ``error`` event, or one in another server's shape (an
    ``event: error`` line over ``{"code", "message", "type": "server_error"}``, llama-server
    b11434; a bare ``{"error": {...}}``, the chat shape)."""
    if payload.get("type") == "error" or event_name == "error":
        return True
    return "type" not in payload and isinstance(payload.get("error"), dict)


def error(payload: JSONObject) -> JSONObject | None:
    """An upstream error in Anthropic's shape, ``{"type": "error", "error": {"type",
    "message"}}``; None when it is in that shape already."""
    body = payload.get("error")
    if payload.get("type") == "error" and isinstance(body, dict) and "message" in body:
        return None
    source = body if isinstance(body, dict) else payload
    message = source.get("message")
    if not isinstance(message, str):
        message = str(source.get("message") or source.get("code") or "upstream error")
    kind = source.get("type")
    return error_object(message, stream_error_type(kind if isinstance(kind, str) else None))


def message_delta(payload: JSONObject, *, tool_blocks: int, bad_input: bool) -> list[Repair]:
    """The turn's stop reason set right: ``tool_use`` after tool_use blocks, ``max_tokens``
    when a tool input does not parse (the hardening rule: a cut call is not a clean finish)."""
    body = payload.get("delta")
    if not isinstance(body, dict):
        payload["delta"] = body = {}
    repairs: list[Repair] = []
    reason = body.get("stop_reason")
    if bad_input and reason in (None, "", "end_turn", "tool_use"):
        body["stop_reason"] = "max_tokens"
        repairs.append(Repair.TOOL_INPUT_UNPARSABLE)
    elif tool_blocks and reason in (None, "", "end_turn"):
        body["stop_reason"] = "tool_use"
        repairs.append(Repair.STOP_REASON_NOT_TOOL_USE)
    elif reason in (None, ""):
        body["stop_reason"] = "end_turn"
        repairs.append(Repair.STOP_REASON_EMPTY)
    if body["stop_reason"] != "stop_sequence" and body.get("stop_sequence") == "":
        body["stop_sequence"] = None
        repairs.append(Repair.STOP_REASON_EMPTY)
    usage = payload.get("usage")
    if not isinstance(usage, dict):
        payload["usage"] = usage = {}
    if not isinstance(usage.get("output_tokens"), int):
        usage["output_tokens"] = 0
        repairs.append(Repair.EMPTY_FIELD_DROPPED)
    return repairs
