"""An encoder double for the chat bridge: it keeps the neutral events it is fed, so a test can
read what the bridge decoded."""

from __future__ import annotations

from proxy.core.events import StreamEvent
from proxy.core.jsonvalues import JSONObject


class Recorder:
    """An encoder that keeps the events it is fed (one line of bytes each, for ordering)."""

    def __init__(self) -> None:
        self.events: list[StreamEvent] = []
        self.kept = 0

    def feed(self, event: StreamEvent) -> list[bytes]:
        self.events.append(event)
        return [type(event).__name__.encode()]

    def response(self) -> JSONObject:
        return {}
