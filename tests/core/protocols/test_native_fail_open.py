"""A dialect that raises in a native stream: its text, held part included, comes back as text.

No registered dialect raises (each fails open by itself); the double from the chat tests does,
on text containing ``BOOM``. Both native repairers share proxy/core/markup/fail_open.py.
"""

from __future__ import annotations

import importlib
import itertools
from collections import Counter

import pytest

from proxy.core.errors import DialectError
from proxy.core.events import Ended, Finished, FinishReason, Started, TextDelta, Usage
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.responses.native import structure as native_flow
from proxy.core.protocols.responses.native.request import NativeRequest
from proxy.core.protocols.responses.native.stream import NativeStream
from tests.core.protocols.chat.test_markup_calls import FailingHermes
from tests.core.protocols.messages import streams
from tests.core.protocols.messages.checker import check
from tests.core.protocols.messages.native_helpers import repair
from tests.core.protocols.responses import variants as v
from tests.core.protocols.responses.checker import check as check_responses
from tests.core.protocols.responses.test_native import WEATHER_TOOLS

# the module that builds a text block's extractor (structure.py, since the block half moved
# there from stream.py: issue 27's leftover); imported by path as the responses one is
messages_native = importlib.import_module("proxy.core.protocols.messages.native.structure")

# "<tool" and then "<tool_ca" are held as a possible marker when BOOM makes the dialect fail
PIECES = ["a <tool", "_ca", "BOOM", " later"]


class FailingAtTheEnd(FailingHermes):
    """Fails in ``close``, while it holds a possible marker."""

    def close(self):
        raise DialectError("told to fail at the end")


def _messages_text(pieces: list[str]) -> bytes:
    """A recorded text-only Messages stream, its text block's deltas replaced by ``pieces``."""
    events = streams.hermes_markup(streams.parsed("anthropic-sonnet45-text-only"))
    deltas = [{**events[2], "delta": {"type": "text_delta", "text": piece}} for piece in pieces]
    return streams.sse([*events[:2], *deltas, *events[-3:]])


def _responses_text(pieces: list[str]) -> bytes:
    return v.sse(
        v.encoded(
            [
                Started("resp_1", "m", 0),
                *(TextDelta(piece) for piece in pieces),
                Finished(FinishReason.STOP),
                Usage(1, 2),
                Ended(complete=True),
            ]
        )
    )


def _responses_repair(body: bytes) -> tuple[bytes, Counter[str]]:
    counter = itertools.count(1)
    stream = NativeStream(
        lambda: f"n{next(counter):04d}",
        NativeRequest.from_body(WEATHER_TOOLS),
        options=UpstreamOptions(dialects=("auto",)),
    )
    out = b"".join([*stream.feed(body), *stream.close(complete=True)])
    return out, stream.repairs


def _messages(monkeypatch, double, pieces):
    monkeypatch.setattr(messages_native, "build_extractor", lambda names, tools: double(tools))
    out, repairs = repair(_messages_text(pieces))
    result = check(out)
    return result.text, result.tool_uses, repairs


def _responses(monkeypatch, double, pieces):
    monkeypatch.setattr(native_flow, "build_extractor", lambda names, tools: double(tools))
    out, repairs = _responses_repair(_responses_text(pieces))
    checked = check_responses(out)
    return checked.text, checked.calls, repairs


@pytest.mark.parametrize("protocol", [_messages, _responses], ids=["messages", "responses"])
@pytest.mark.parametrize(
    ("double", "pieces"),
    [(FailingHermes, PIECES), (FailingAtTheEnd, ["a <tool", "_ca"])],
    ids=["in-feed", "in-close"],
)
def test_a_native_stream_gives_back_the_text_a_failing_dialect_held(
    monkeypatch, protocol, double, pieces
):
    text, calls, repairs = protocol(monkeypatch, double, pieces)
    assert text == "".join(pieces)
    assert calls == []
    assert repairs["dialect-error"] == 1
