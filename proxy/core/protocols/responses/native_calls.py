"""A native stream's function calls: their own fields and arguments (quirks 1-3, §6 llama.cpp).

A call's ``call_id`` is made when empty; arguments a server puts whole in the item's
``output_item.added`` or only in its ``.done`` events go out as a delta as well; a missing
``function_call_arguments.done`` is inserted; a call whose arguments do not parse is
``incomplete`` (and so, at its end, the response: ``cut``). The item flow (native_flow.py)
decides when each of these runs; the functions here only fix the call in front of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.core.protocols.chat.chunks import INVALID, loads
from proxy.core.protocols.responses.native_items import Ev, JSONObject, Out
from proxy.core.repairs import Repair

if TYPE_CHECKING:
    from proxy.core.protocols.responses.native_flow import ItemFlow


def added(s: ItemFlow, ev: Ev, item: JSONObject, out: Out) -> str:
    """A call's ``output_item.added`` as it is shown: its call_id and name on ``out``; the
    arguments it carried already are taken out, returned to go out as a delta after it."""
    if not item.get("call_id"):
        s.repair(Repair.CALL_ID_MISSING)
        item["call_id"] = "call_" + s.new_id()
        ev.changed()
    out.call_id, out.name = str(item["call_id"]), str(item.get("name"))
    if out.name == "parallel":
        s.repair(Repair.PARALLEL_WRAPPER)
    moved = item.get("arguments") or ""
    if moved:  # a whole call in its added: the arguments go out as a delta
        s.repair(Repair.ARGS_IN_FIRST_DELTA)
        item["arguments"] = ""
        ev.changed()
    return str(moved)


def arguments_delta(s: ItemFlow, out: Out, text: str) -> None:
    out.args.append(text)
    out.arg_deltas = True
    s.insert(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": out.id,
            "output_index": out.index,
            "delta": text,
        }
    )


def arguments_done(s: ItemFlow, ev: Ev, out: Out) -> None:
    arguments = ev.get("arguments")
    if not out.arg_deltas and isinstance(arguments, str) and arguments:
        s.repair(Repair.ARGS_ONLY_IN_DONE)
        arguments_delta(s, out, arguments)
    out.args_done = True
    s.emit(ev)


def call_done(s: ItemFlow, ev: Ev, item: JSONObject, out: Out) -> None:
    """A call's ``output_item.done``: the fields it was shown with, its arguments streamed
    and ended, and ``incomplete`` when they do not parse."""
    for key, value in (("call_id", out.call_id), ("name", out.name)):
        if item.get(key) != value:
            s.repair(Repair.NAME_MISSING if key == "name" else Repair.CALL_ID_MISSING)
            item[key] = value
            ev.changed()
    arguments = item.get("arguments")
    if not out.arg_deltas and isinstance(arguments, str) and arguments:
        s.repair(Repair.ARGS_ONLY_IN_DONE)
        arguments_delta(s, out, arguments)
    if not isinstance(arguments, str):
        item["arguments"] = out.arguments
        ev.changed()
    if not out.args_done:
        s.repair(Repair.ARGS_DONE_MISSING)
        _insert_arguments_done(s, out, item["arguments"])
    if loads(item["arguments"]) is INVALID and item.get("status") != "incomplete":
        s.cut = True
        item["status"] = "incomplete"
        ev.changed()


def ended_early(s: ItemFlow, out: Out) -> JSONObject:
    """The item of a call the upstream never ended, as the proxy ends it."""
    if not out.args_done:
        _insert_arguments_done(s, out, out.arguments)
    status = "completed" if loads(out.arguments) is not INVALID else "incomplete"
    s.cut = s.cut or status == "incomplete"
    return {
        "id": out.id,
        "type": "function_call",
        "status": status,
        "arguments": out.arguments,
        "call_id": out.call_id,
        "name": out.name,
    }


def _insert_arguments_done(s: ItemFlow, out: Out, arguments: object) -> None:
    s.insert(
        {
            "type": "response.function_call_arguments.done",
            "item_id": out.id,
            "output_index": out.index,
            "arguments": arguments,
        }
    )
    out.args_done = True


def held_arguments(queue: list[Ev], done: object) -> str:
    """A held call's arguments: its deltas, else what its done events or its added carry."""
    deltas = [ev.get("delta") for ev in queue if ev.type.endswith("arguments.delta")]
    if deltas:
        return "".join(d for d in deltas if isinstance(d, str))
    ends = [ev.get("arguments") for ev in queue if ev.type.endswith("arguments.done")]
    ends.append(done.get("arguments") if isinstance(done, dict) else None)
    ends.append(queue[0].payload["item"].get("arguments"))
    return next((a for a in ends if isinstance(a, str) and a), "")
