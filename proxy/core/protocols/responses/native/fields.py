"""A native stream's function calls: their own fields and arguments (R1-R3, llama.cpp's endpoint).

Arguments a server puts whole in the item's ``output_item.added`` go out as a delta after
it; a missing ``function_call_arguments.done`` is inserted; a call whose arguments do not
parse is ``incomplete`` (and so, at its end, the response: ``cut``). The call's state, its
ids and its text are the call driver's (native_driver.py); the item flow (native_flow.py)
decides when each of these runs; the functions here only fix the call in front of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from proxy.core.jsonvalues import INVALID, JSONObject, loads
from proxy.core.protocols.responses.native.calls import END
from proxy.core.protocols.responses.native.model import Ev, Out
from proxy.core.repairs import Repair

if TYPE_CHECKING:
    from proxy.core.protocols.responses.native.structure import ItemFlow


def added(s: ItemFlow, ev: Ev, item: JSONObject, out: Out) -> str:
    """A call's ``output_item.added`` as it is shown (its call_id and name settled by the
    driver): those on ``out``; the arguments it carried already are taken out, returned to
    go out as a delta after it."""
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
    s.insert(
        {
            "type": "response.function_call_arguments.delta",
            "item_id": out.id,
            "output_index": out.index,
            "delta": text,
        }
    )


def call_done(s: ItemFlow, ev: Ev, item: JSONObject, out: Out) -> None:
    """A call's ``output_item.done``: the fields it was shown with, its arguments streamed
    and ended (the driver's END), and ``incomplete`` when they do not parse."""
    for key, value in (("call_id", out.call_id), ("name", out.name)):
        if item.get(key) != value:
            s.repair(Repair.NAME_MISSING if key == "name" else Repair.CALL_ID_MISSING)
            item[key] = value
            ev.changed()
    arguments = item.get("arguments")
    if out.call is not None:
        s.args_in_done(out.call, arguments)
        s.call_input(out.call, END)
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
    if out.call is not None:
        s.call_input(out.call, END)
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
