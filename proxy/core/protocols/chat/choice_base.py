"""What one choice of a streamed chat completion keeps while it works through the stream.

:class:`ChoiceBase` holds the per-choice state that the layers of the choice normalizer
share; each layer is a module of one job, built on the ones before it:

1. chat/call_pieces.py: building the output pieces of a call (the opening, an argument delta);
2. chat/call_driver.py: driving the call state machine (proxy/core/calls/state.py);
3. chat/call_matching.py: which call a ``tool_calls`` entry belongs to, and what of it is news;
4. chat/markup_bridge.py: tool calls written as markup in the text (Q32);
5. chat/hot_paths.py: the deltas that go out as they came, judged without ``process``;
6. chat/finish.py: finish reasons and the end of the stream;
7. chat/choice.py: :class:`ChoiceNormalizer`, one chunk of the choice through all of them.

One class rather than objects passed around: every delta of a stream reaches these
attributes, and a layer of indirection would be paid on each of them.
"""

from __future__ import annotations

from proxy.core.calls.repeats import Repeats
from proxy.core.calls.state import S1, S1_STREAMS, S2, S2_STREAMS, CallState, Table
from proxy.core.markup.base import Extractor
from proxy.core.protocols.chat.chunks import JSONObject
from proxy.core.protocols.chat.pieces import Call, Source, StreamContext
from proxy.core.repairs import Repair


class ChoiceBase:
    def __init__(self, stream: StreamContext, source: Source, choice: JSONObject) -> None:
        self._s = stream
        self._table: Table = S2 if stream.coalesce else S1
        # the table's answer to "does a fragment of a call in this state go out as it came"
        self._streams: tuple[CallState, ...] = S2_STREAMS if stream.coalesce else S1_STREAMS
        self._calls: list[Call] = []
        # Found without a scan over the calls, which a choice of thousands would make on
        # every delta: the held placeholders (in S1 at most one, as a call only becomes one
        # right after the others were released), and the first call S2 has not sent whole
        # (every call before it is OPEN, which a call stays).
        self._placeholders: dict[Call, None] = {}
        self._suspects: dict[Call, None] = {}  # held until their arguments end (SUSPECT)
        self._repeats = Repeats(dedupe=stream.dedupe)
        self._unsent = 0
        self._by_key: dict[int | str, Call] = {}
        self._by_id: dict[str, Call] = {}
        self._last: Call | None = None
        self._next_index = 0
        self._sent_calls = 0
        self.finished: object = None
        self._source = source  # the latest chunk of this choice
        self._choice = choice
        self._extractors: dict[str, Extractor | None] = {}
        self._markup_call: dict[str, Call | None] = {}
        self._held_text: dict[str, str] = {}  # what an extractor holds, as far as known
        self._extracting = bool(stream.extract)
        self._cut = False  # a call ended with arguments that are not JSON, or its markup open

    def _record(self, repair: Repair) -> None:
        self._s.repairs[repair] += 1
