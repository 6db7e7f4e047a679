"""Tool call ids the Mistral family's templates accept: exactly nine ASCII letters and digits.

The map is one-way and stateless: an id is replaced by nine base-62 digits of its SHA-256, so
the assistant's ``tool_calls[].id`` and the tool message's ``tool_call_id`` map alike, and the
same client id maps the same way on every turn with nothing remembered. Valid ids are kept.

Collisions: 62**9 (about 1.35e16) targets make a chance collision among n ids about
n**2 / 2.7e16 (1e-8 for ten thousand calls); even so, within one request each target is
checked against every other id of the request (the valid ones kept as they are, and the targets
already given), and a taken target is drawn again from the id with a counter appended. The
ids are assigned in the order they first appear, so a conversation that only grows (as an
agent's does) gives its earlier ids the same targets on every later turn.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

_VALID: Final = re.compile(r"[A-Za-z0-9]{9}")
_DIGITS: Final = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
LENGTH: Final = 9


def valid(call_id: object) -> bool:
    return isinstance(call_id, str) and _VALID.fullmatch(call_id) is not None


def _digest(text: str) -> str:
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(LENGTH):
        number, digit = divmod(number, 62)
        out.append(_DIGITS[digit])
    return "".join(out)


def id_map(call_ids: Iterable[str]) -> dict[str, str]:
    """Every id of one request that Mistral's templates refuse -> its nine-character stand-in,
    distinct from each other and from the request's valid ids. ``call_ids`` in order of first
    appearance."""
    ordered = list(dict.fromkeys(call_ids))
    taken = {call_id for call_id in ordered if valid(call_id)}
    mapping: dict[str, str] = {}
    for call_id in ordered:
        if call_id in taken:
            continue
        target, attempt = _digest(call_id), 0
        while target in taken:
            attempt += 1
            target = _digest(f"{call_id}#{attempt}")
        taken.add(target)
        mapping[call_id] = target
    return mapping
