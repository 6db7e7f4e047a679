"""A choice's finish: the finish reason corrected, and where it goes.

A finish reason ends every call (the held ones go out: chat/choice.py), is corrected (Q23,
Q24) and goes into a delta of its own when the chunk carried tool calls (Q26).

A finish the proxy writes as ``tool_calls`` itself (for ``stop``, Q23, or where the upstream
sent none, Q25) becomes ``length`` when a call was cut off: its arguments do not parse as
JSON at the end, or its markup never closed (``args-truncated``). A client must not run such a
call. The upstream's own ``tool_calls`` stays (the arguments are only counted, Q18).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Final

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.chat.deltas import KEPT, NO_FIELDS, FieldsDelta, KeptDelta
from proxy.core.protocols.chat.pieces import Piece, Source
from proxy.core.repairs import Repair

_FINISH_MAP: Final = {"eos_token": "stop", "end_turn": "stop"}  # Q24; "" is handled apart


def read_finish(finish: object, record: Callable[[Repair], None]) -> object:
    """The upstream's finish reason, corrected (Q24)."""
    if finish == "":
        record(Repair.FINISH_NONSTANDARD)
        return None
    if isinstance(finish, str) and finish in _FINISH_MAP:
        record(Repair.FINISH_NONSTANDARD)
        return _FINISH_MAP[finish]
    return finish


def attach_finish(
    finish: object,
    pieces: list[Piece],
    at: Source,
    choice: JSONObject,
    delta: object,
    *,
    had_calls: bool,
    record: Callable[[Repair], None],
) -> None:
    """Put ``finish`` on the chunk's last piece when it carries no call, else on a delta of
    its own in the envelope of ``at`` (Q26); ``delta``: the upstream's (an object, else the
    choice goes as it came)."""
    last = pieces[-1] if pieces else None
    if last is not None and isinstance(last.delta, KeptDelta | FieldsDelta):
        pieces[-1] = replace(last, finish=finish)
        return
    if had_calls:
        record(Repair.FINISH_ON_TOOL_CALL_CHUNK)
    base = FieldsDelta(NO_FIELDS) if isinstance(delta, dict) else KEPT
    pieces.append(Piece(at, choice, base, finish))
