"""What holding a markup call until its markup is complete costs (issue 24 item 4): how many
upstream events after the one that carried a call's first argument byte the client gets it.

Run ``python -m bench.markup_hold`` in each checkout (before and after) and compare; times
are those events at a model's pace of 20 ms a token (the benchmark's 100 x 20 ms streams).
"""

from __future__ import annotations

from typing import Any

import orjson

from bench.shapes import HERMES_CLOSE, HERMES_OPEN, TOOLS
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream

MS_PER_TOKEN = 20
# a typical call (Qwen-style tokens) and the benchmark's hermes call with 100 argument tokens
CALLS = {
    "short call (11 argument tokens)": (
        *HERMES_OPEN,
        *("Par", "is", ",", " France", '",', ' "', "unit", '":', ' "', "cel", "sius"),
        *HERMES_CLOSE,
    ),
    "bench hermes (100 argument tokens)": (*HERMES_OPEN, *["tok "] * 100, *HERMES_CLOSE),
}


def _event(delta: dict[str, object], finish: str | None = None) -> bytes:
    chunk = {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunk["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    return b"data: " + orjson.dumps(chunk) + b"\n\n"


def delay(tokens: tuple[str, ...]) -> int:
    """Upstream events between the first argument byte's and the client getting it."""
    first_arg = tokens.index(' {"')  # the arguments object opens here
    stream = ChatSSEStream(
        StreamNormalizer(
            UpstreamOptions(dialects=("hermes",)),
            RequestInfo.from_body({"tools": TOOLS}),
            new_id=lambda: "x",
        )
    )
    stream.feed(_event({"role": "assistant", "content": ""}))
    for at, token in enumerate(tokens):
        for event in b"".join(stream.feed(_event({"content": token}))).split(b"\n\n"):
            if event.startswith(b"data: {") and _has_arguments(orjson.loads(event[6:])):
                return at - first_arg
    raise AssertionError("no argument byte came out")


def _has_arguments(chunk: dict[str, Any]) -> bool:
    calls = chunk["choices"][0]["delta"].get("tool_calls") or ()
    return any(call.get("function", {}).get("arguments") for call in calls)


def main() -> None:
    for name, tokens in CALLS.items():
        events = delay(tokens)
        print(f"{name}: {events} events, {events * MS_PER_TOKEN} ms at {MS_PER_TOKEN} ms a token")


if __name__ == "__main__":
    main()
