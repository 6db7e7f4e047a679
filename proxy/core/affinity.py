"""Which conversation a request belongs to, so that its turns go to one replica.

An agent's turns resend a long prompt (7-33k tokens) whose prefix the model server caches;
scattered over replicas, every turn would pay for that prefix again. The key is the first of:

1. the ``x-session-affinity`` header (OpenCode sends it);
2. the body's ``prompt_cache_key`` (Codex, and OpenAI's own clients, set it per conversation);
3. a ``session_id`` or ``x-session-id`` header;
4. a hash of the conversation's start: the body's ``system`` (Messages), ``instructions``
   (Responses) and its first two ``messages`` or ``input`` items, which a conversation's
   later turns repeat unchanged. A body with none of these has no key.

Header names are matched case-insensitively by the caller's mapping.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Final

import orjson

HEADERS_FIRST: Final = ("x-session-affinity",)
HEADERS_THEN: Final = ("session_id", "x-session-id")
#: how many of a conversation's first items name it: the system prompt and the first user turn
OPENING_ITEMS: Final = 2
#: a key longer than this is hashed to it, so that a client cannot make the ring hash megabytes
MAX_KEY: Final = 256


def affinity_key(headers: Mapping[str, str], payload: object) -> str | None:
    """The request's conversation, or None when it names none."""
    for name in HEADERS_FIRST:
        if value := headers.get(name):
            return _bounded("h:" + value)
    body = payload if isinstance(payload, dict) else {}
    cache_key = body.get("prompt_cache_key")
    if isinstance(cache_key, str) and cache_key:
        return _bounded("p:" + cache_key)
    for name in HEADERS_THEN:
        if value := headers.get(name):
            return _bounded("h:" + value)
    return _opening(body)


def _opening(body: dict[str, object]) -> str | None:
    turns = body.get("messages")
    if not isinstance(turns, list):
        turns = body.get("input")
    opening = {
        "system": body.get("system"),
        "instructions": body.get("instructions"),
        "turns": turns[:OPENING_ITEMS] if isinstance(turns, list) else turns,
    }
    if all(value is None or value == [] for value in opening.values()):
        return None
    try:
        text = orjson.dumps(opening)
    except TypeError:  # JSON always serializes; anything else names no conversation
        return None
    return "m:" + hashlib.blake2b(text, digest_size=16).hexdigest()


def _bounded(key: str) -> str:
    if len(key) <= MAX_KEY:
        return key
    return key[:2] + hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
