"""Writing one Messages stream event: an ``event:`` line naming its type, then compact JSON.

The anthropic SDKs dispatch on the ``event:`` line and drop an event without one, so every
event the proxy writes has it.
"""

from __future__ import annotations

import orjson

from proxy.core.jsonvalues import JSONObject
from proxy.core.sse import encode_event


def encode(event: JSONObject) -> bytes:
    """``event`` (which has its ``type``) as one SSE event."""
    return encode_event(orjson.dumps(event), event=str(event["type"]))
