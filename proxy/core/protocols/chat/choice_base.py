"""What one choice of a streamed chat completion keeps while it works through the stream.

:class:`ChoiceBase` holds the per-choice state that the layers of the choice normalizer
share; each layer is a module of one job, built on the ones before it:

1. proxy/core/calls/driver.py: driving the call state machine (calls/state.py), protocol apart;
2. chat/call_pieces.py: the output pieces the driver asks for (the opening, an argument delta);
3. chat/call_matching.py: which call a ``tool_calls`` entry belongs to, and what of it is news;
4. chat/markup_bridge.py: tool calls written as markup in the text (Q32);
5. chat/hot_paths.py: the deltas that go out as they came, judged without ``process``;
6. chat/finish.py: finish reasons and the end of the stream;
7. chat/choice.py: :class:`ChoiceNormalizer`, one chunk of the choice through all of them.

One class rather than objects passed around: every delta of a stream reaches these
attributes, and a layer of indirection would be paid on each of them.
"""

from __future__ import annotations

from proxy.core.calls.driver import Calls
from proxy.core.jsonvalues import JSONObject
from proxy.core.markup.base import Extractor
from proxy.core.protocols.chat.deltas import Extras
from proxy.core.protocols.chat.pieces import Call, Sink, Source, StreamContext


class ChoiceBase:
    _calls: Calls[Call, Sink, Extras]

    def __init__(self, stream: StreamContext, source: Source, choice: JSONObject) -> None:
        # the calls, their state table and their identities (proxy/core/calls/driver.py),
        # made by chat/call_pieces.py, whose methods build what they send
        self._s = stream
        self._by_key: dict[int | str, Call] = {}
        self._by_id: dict[str, Call] = {}
        self._last: Call | None = None
        self.finished: object = None
        self._source = source  # the latest chunk of this choice
        self._choice = choice
        self._extractors: dict[str, Extractor | None] = {}
        self._markup_call: dict[str, Call | None] = {}
        self._held_text: dict[str, str] = {}  # what an extractor holds, as far as known
        self._extracting = bool(stream.extract)
        self._cut = False  # a call ended with arguments that are not JSON, or its markup open
