"""``POST /v1/messages/count_tokens``: a documented estimate, so that clients that ask do not fail.

A chat-only upstream has no tokenizer endpoint the proxy can rely on, so the answer is an
estimate: the characters of the system prompt, the messages' text and tool inputs, and the
tools' names, descriptions and schemas, divided by four (a common rule of thumb for English
and code with BPE tokenizers), rounded up. Clients use the figure to decide when to compact a
conversation; an estimate within tens of percent serves that.
"""

from __future__ import annotations

from typing import Final

import orjson

from proxy.core.jsonvalues import JSONObject

CHARS_PER_TOKEN: Final = 4


def count_tokens(body: JSONObject) -> JSONObject:
    chars = sum(_chars(body.get(key)) for key in ("system", "messages", "tools"))
    return {"input_tokens": -(-chars // CHARS_PER_TOKEN)}


def _chars(value: object) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(_chars(item) for item in value)
    if isinstance(value, dict):
        return sum(_chars(item) for key, item in value.items() if key not in _SKIPPED)
    return len(orjson.dumps(value))


# fields that are not text the model reads: markers, ids, image bytes
_SKIPPED: Final = frozenset({"type", "role", "cache_control", "id", "tool_use_id", "source"})
