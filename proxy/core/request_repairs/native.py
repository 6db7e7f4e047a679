"""The request repairs of native mode (a client of another protocol served by the upstream's
own endpoint), by client protocol: an explicit registry the shell looks up by the protocol's
name."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.messages.native import request as messages_native
from proxy.core.protocols.responses.context import ToolRef
from proxy.core.protocols.responses.native import tools as native_tools


@dataclass(frozen=True, slots=True)
class NativeRepaired:
    body: JSONObject  #: the request to send (the very body when nothing changed)
    repairs: Counter[str] = field(default_factory=Counter)
    #: Responses: flattened function names -> the client's tools, to name the calls back
    names: Mapping[str, ToolRef] = field(default_factory=dict)


def _responses(body: JSONObject) -> NativeRepaired:
    sent, names, repairs = native_tools.native_request(body)
    return NativeRepaired(sent, repairs, names)


def _messages(body: JSONObject) -> NativeRepaired:
    sent, repairs = messages_native.native_request(body)
    return NativeRepaired(sent, repairs)


NATIVE_REQUEST_REPAIRS: Final[Mapping[str, Callable[[JSONObject], NativeRepaired]]] = {
    "responses": _responses,
    "messages": _messages,
}
