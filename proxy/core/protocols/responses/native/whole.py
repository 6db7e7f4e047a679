"""A server's own non-streamed Response object (``stream: false``), repaired where it must be.

The streamed repairs that have a counterpart in a whole object: a function_call item with an
empty ``call_id`` gets one, and a missing ``usage`` becomes zeros. A body that is not a Response
object passes as it came, and so does one that needs nothing (byte for byte).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable

import orjson

from proxy.core.arguments.rules import call_rules
from proxy.core.arguments.tools import RequestTools
from proxy.core.jsonvalues import JSONObject, loads
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.native_calls import changes, whole_calls
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.think import leading_think
from proxy.core.repairs import Repair


def repair_completion(
    body: bytes,
    request: NativeRequest,
    *,
    options: UpstreamOptions,
    new_id: Callable[[], str] | None = None,
) -> tuple[bytes, Counter[str]]:
    repairs: Counter[str] = Counter()
    response = loads(body)
    if not isinstance(response, dict) or not isinstance(response.get("output"), list):
        return body, repairs
    numbers = itertools.count(1)
    if options.think_in_content and new_id is not None:
        response["output"] = _leading_think(response["output"], new_id, repairs)
    for item in response["output"]:
        if not isinstance(item, dict) or item.get("type") != "function_call":
            continue
        if not item.get("call_id"):
            repairs[Repair.CALL_ID_MISSING] += 1
            # unique within the response: the item's id, else its position
            item["call_id"] = f"call_{item.get('id') or next(numbers)}"
        if not item.get("name") and request.fallback_name:
            repairs[Repair.NAME_MISSING] += 1
            item["name"] = request.fallback_name
    if not isinstance(response.get("usage"), dict):
        repairs[Repair.USAGE_MISSING] += 1
        response["usage"] = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    # issue 25: the calls' arguments at their end, which a whole Response is
    tools = RequestTools.from_chat(request.chat_tools) if request.chat_tools else None
    limited = response.get("status") == "incomplete"
    response["output"] = whole_calls(
        response["output"],
        "function_call",
        rules=call_rules(options, tools),
        one_call=request.one_call and options.enforce_parallel_tool_calls,
        repairs=repairs,
        cut=lambda item: limited or item.get("status") == "incomplete",
        read=lambda item: item["arguments"] if isinstance(item.get("arguments"), str) else None,
        write=lambda item, text: item.__setitem__("arguments", text),
        # a wrapper's entries as items of the proxy's (issue 24 item 6)
        unwrap=None if new_id is None else lambda item, name, text: _entry_item(new_id, name, text),
    )
    return (orjson.dumps(response) if changes(repairs) else body), repairs


def _entry_item(new_id: Callable[[], str], name: str, arguments: str) -> JSONObject:
    """One call of a wrapper's, as a function_call item of the proxy's."""
    return {
        "id": "fc_" + new_id(),
        "type": "function_call",
        "status": "completed",
        "arguments": arguments,
        "call_id": "call_" + new_id(),
        "name": name,
    }


def _leading_think(
    output: list[object], new_id: Callable[[], str], repairs: Counter[str]
) -> list[object]:
    """Under ``think_in_content`` (issue 24 item 11), a first item that is a message whose
    first text begins with a ``<think>`` block: a reasoning item of its text (a summary, as
    translate mode writes reasoning) before the message, which keeps the rest."""
    first = output[0] if output else None
    if not isinstance(first, dict) or first.get("type") != "message":
        return output
    parts = first.get("content")
    part = parts[0] if isinstance(parts, list) and parts else None
    if not isinstance(part, dict) or part.get("type") != "output_text":
        return output
    text = part.get("text")
    split = leading_think(text) if isinstance(text, str) else None
    if split is None:
        return output
    repairs[Repair.THINK_IN_CONTENT] += 1
    part["text"] = split[1]
    summary = [{"type": "summary_text", "text": split[0]}]
    return [{"id": "rs_" + new_id(), "type": "reasoning", "summary": summary}, *output]
