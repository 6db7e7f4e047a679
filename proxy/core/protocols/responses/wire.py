"""Responses events on the wire: an ``event:`` line equal to the payload's ``type``, and a
``sequence_number`` from 0, up by one per event over the whole stream."""

from __future__ import annotations

from typing import Any

import orjson

from proxy.core.sse import encode_event


class Sequencer:
    __slots__ = ("next",)

    def __init__(self, start: int = 0) -> None:
        self.next = start

    def number(self, payload: dict[str, Any]) -> dict[str, Any]:
        payload["sequence_number"] = self.next
        self.next += 1
        return payload

    def write(self, payload: dict[str, Any]) -> bytes:
        """The payload numbered (in place) and framed as one SSE event."""
        self.number(payload)
        return frame(payload)


def frame(payload: dict[str, Any]) -> bytes:
    return encode_event(orjson.dumps(payload), event=str(payload["type"]))
