"""Running chat upstream bytes through the translate pipeline to a Messages client."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from proxy.core.bridge import ChatBridge
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.core.protocols.messages.encode import MessagesEncoder
from proxy.core.protocols.messages.request import MessagesContext
from tests.support.normalizer import counting_ids

GOLDEN = Path(__file__).parents[3] / "golden"
CASES: list[dict[str, Any]] = json.loads((GOLDEN / "cases.json").read_text(encoding="utf-8"))
REQUESTS: dict[str, Any] = json.loads((GOLDEN / "requests.json").read_text(encoding="utf-8"))
SINGLE = [c for c in CASES if len(c["expect"]) == 1]


def translate(
    chat_request: dict[str, Any],
    reads: list[bytes],
    *,
    complete: bool = True,
    context: MessagesContext | None = None,
    options: UpstreamOptions | None = None,
) -> tuple[bytes, MessagesEncoder]:
    normalizer = StreamNormalizer(
        options or UpstreamOptions(),
        RequestInfo.from_body(chat_request),
        new_id=counting_ids(),
    )
    counter = itertools.count(1)
    # stream=False keeps the whole Message beside the same events, for the tests that
    # compare the two (a streaming encoder keeps only what its stop reason needs)
    encoder = MessagesEncoder(
        context or MessagesContext("claude-test"), lambda: f"m{next(counter):08d}", stream=False
    )
    bridge = ChatBridge(ChatSSEStream(normalizer), encoder)
    out = [b for read in reads for b in bridge.feed(read)]
    out += bridge.close(complete=complete)
    return b"".join(out), encoder
