"""The bounds on a request body the proxy works on, checked right after the parse and before
anything else is done with it (a 400 past them, naming the setting):

* ``limits.max_json_depth``: how deeply the body's arrays and objects may nest. The proxy
  writes parts of a request again (the translated request, a tool's schema or input, the
  fields a Response echoes, a body with ``model_map`` applied), orjson writes at most
  :data:`ORJSON_DEPTH` levels, and ``count_tokens`` walks the body: past the limit none of
  that could be done, so nothing of it is begun.
* ``limits.max_tools``: how many tools a Responses or Messages request may offer, each function
  of a Responses ``namespace`` counted as one. Every tool is converted (translate mode) or
  read (native mode) one by one, in Python; the count is checked on the parsed lists' lengths
  alone, before any of that.
"""

from __future__ import annotations

from typing import Final

import orjson

from proxy.core.errors import ClientRequestError


def _orjson_depth() -> int:
    """The deepest nesting orjson writes (254 since orjson 3.0), found rather than assumed."""
    low, high = 1, 4096  # orjson writes ``low`` levels; it refuses ``high``
    while high - low > 1:
        middle = (low + high) // 2
        try:
            orjson.dumps(_nested(middle, 0))
        except orjson.JSONEncodeError:
            high = middle
        else:
            low = middle
    return low


def _nested(levels: int, value: object) -> object:
    for _ in range(levels):
        value = [value]
    return value


ORJSON_DEPTH: Final = _orjson_depth()
#: the most ``limits.max_json_depth`` may be: the proxy nests a client's value at most this
#: many levels deeper when it writes it again (a tool's schema inside a Response event)
WRAPPING: Final = 8
MAX_JSON_DEPTH: Final = ORJSON_DEPTH - WRAPPING


def check_depth(payload: object, limit: int) -> None:
    """A 400 when ``payload`` (parsed JSON) nests more than ``limit`` arrays and objects.

    orjson refuses to write a value nested more than :data:`ORJSON_DEPTH` deep; wrapped in
    ``ORJSON_DEPTH - limit`` lists, the payload is written only when it is at most ``limit``
    deep. That is the check at orjson's speed (about a fifth of the parse), with no walk of
    the body in Python; what it writes is thrown away.
    """
    try:
        orjson.dumps(_nested(ORJSON_DEPTH - limit, payload))
    except orjson.JSONEncodeError:
        raise ClientRequestError(
            f"the request body nests arrays and objects more than {limit} levels deep"
            " (limits.max_json_depth)"
        ) from None


def check_tools(payload: object, limit: int) -> None:
    """A 400 when the body's ``tools`` are more than ``limit``, a namespace's counted one by
    one (only list lengths are read: the tools' shapes are the protocol's to check)."""
    tools = payload.get("tools") if isinstance(payload, dict) else None
    if not isinstance(tools, list):
        return
    count = len(tools)
    if count <= limit:
        for tool in tools:
            inner = tool.get("tools") if isinstance(tool, dict) else None
            if isinstance(inner, list):
                count += len(inner) - 1
                if count > limit:
                    break
    if count > limit:
        raise ClientRequestError(
            f"tools: the request offers more than {limit} tools (limits.max_tools)"
        )
