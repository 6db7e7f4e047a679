"""The model's own multi-call wrapper (R9; issue 24 item 6): one call named ``parallel`` or
``multi_tool_use.parallel`` whose arguments list the calls it meant,
``{"tool_uses": [{"recipient_name": "functions.weather", "parameters": {...}}, ...]}``.

gpt-oss writes it (the harmony format's ``multi_tool_use.parallel`` recipient), and so do
OpenAI's own models at times (vercel/ai#19067). No client has a tool of that name, so it
reports an unknown tool. When the request offers no tool of the wrapper's name, the call is
held until its arguments end and becomes one call per entry (calls/driver.py, the table's
``SPLIT``; the whole answers ask :func:`entries` of each call): the entry's name without the
``functions.`` prefix, its parameters as the arguments. Arguments that are not the wrapper's
shape (not JSON, no ``tool_uses`` list, an entry without a name or with parameters that are
no object) leave the call as it came; so does a call cut by a token limit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import orjson

from proxy.core.jsonvalues import INVALID, loads

#: the names the wrapper comes under (the harmony recipient, and the bare name OpenAI's
#: Responses API streams)
WRAPPER_NAMES: Final = frozenset({"parallel", "multi_tool_use.parallel"})
_PREFIX: Final = "functions."


def is_wrapper(name: str | None, offered: Callable[[str], bool]) -> bool:
    """Whether a call of ``name`` is the wrapper: named so, and the request offers no tool
    of that name (``offered``; a client that defines ``parallel`` gets its own call)."""
    return name in WRAPPER_NAMES and not offered(name)


def entries(arguments: str) -> list[tuple[str, str]] | None:
    """The calls the wrapper's ``arguments`` hold, each (name, arguments as JSON text), in
    order; None when they are not the wrapper's shape (the call then stays as it came)."""
    value = loads(arguments)
    if value is INVALID or not isinstance(value, dict):
        return None
    uses = value.get("tool_uses")
    if not isinstance(uses, list) or not uses:
        return None
    found: list[tuple[str, str]] = []
    for use in uses:
        if not isinstance(use, dict):
            return None
        recipient, parameters = use.get("recipient_name"), use.get("parameters", {})
        if not isinstance(recipient, str) or not isinstance(parameters, dict):
            return None
        name = recipient.removeprefix(_PREFIX)
        if not name:
            return None
        try:
            text = orjson.dumps(parameters).decode()
        except orjson.JSONEncodeError:  # a value orjson reads but cannot write
            return None
        found.append((name, text))
    return found
