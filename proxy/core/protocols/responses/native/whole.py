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
