"""A native stream's function call items: their own fields (R1-R3, llama.cpp's endpoint); and
a message item's opening (a gateway's, issue 24 item 10).

Arguments a server puts whole in the item's ``output_item.added`` go out as a delta after
it; a missing ``function_call_arguments.done`` is inserted. The call's state, its ids and its
text are the calls' (calls.py), which decide when each of these runs; the functions here only
fix or build the event in front of them, and say which repairs that took.
"""

from __future__ import annotations

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.responses.native.lifecycle import ContentStep
from proxy.core.protocols.responses.native.model import ClientItem, WireEvent
from proxy.core.repairs import Repair


def shown(ev: WireEvent, item: JSONObject, out: ClientItem) -> tuple[str, list[Repair]]:
    """A call's ``output_item.added`` as it is shown (its call_id and name settled by the
    calls): those on ``out``; the arguments it carried already are taken out, returned to go
    out as a delta after it, with the repairs."""
    repairs: list[Repair] = []
    out.call_id, out.name = str(item["call_id"]), str(item.get("name"))
    moved = item.get("arguments") or ""
    if moved:  # a whole call in its added: the arguments go out as a delta
        repairs.append(Repair.ARGS_IN_FIRST_DELTA)
        item["arguments"] = ""
        ev.changed()
    return str(moved), repairs


def message_added(ev: WireEvent, item: JSONObject) -> list[Repair]:
    """A message's ``output_item.added`` begins it empty: a gateway that puts the empty
    ``output_text`` part in it, which ``content_part.added`` then adds again, has it twice
    for a client that builds the message from the events (``content: []``). Parts that
    carry text are left as they came: nothing is dropped that was said."""
    content = item.get("content")
    if not isinstance(content, list) or not content:
        return []
    if any(not isinstance(part, dict) or part.get("text") for part in content):
        return []
    item["content"] = []
    ev.changed()
    return [Repair.MESSAGE_ADDED_WITH_CONTENT]


def arguments_delta(out: ClientItem, text: str) -> JSONObject:
    return {
        "type": "response.function_call_arguments.delta",
        "item_id": out.id,
        "output_index": out.index,
        "delta": text,
    }


def arguments_done(out: ClientItem, arguments: object) -> JSONObject:
    """The ``function_call_arguments.done`` the upstream never sent (``out`` is done)."""
    out.step(ContentStep.ARGS_DONE)
    return {
        "type": "response.function_call_arguments.done",
        "item_id": out.id,
        "output_index": out.index,
        "arguments": arguments,
    }


def settled_fields(ev: WireEvent, item: JSONObject, out: ClientItem) -> list[Repair]:
    """A call's ``output_item.done`` with the call_id and name it was shown with."""
    repairs: list[Repair] = []
    for key, value in (("call_id", out.call_id), ("name", out.name)):
        if item.get(key) != value:
            repairs.append(Repair.NAME_MISSING if key == "name" else Repair.CALL_ID_MISSING)
            item[key] = value
            ev.changed()
    return repairs
