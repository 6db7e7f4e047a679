"""Properties of the Responses encoder over any event sequence the neutral rules allow: the
output passes the strict checker, and carries the text and every call's arguments as they came
(calls in opening order, however their argument text interleaved)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable

from hypothesis import given
from hypothesis import strategies as st

from proxy.core.events import (
    ArgumentsDelta,
    CallClosed,
    CallOpened,
    Ended,
    Finished,
    FinishReason,
    ReasoningDelta,
    Started,
    StreamEvent,
    TextDelta,
    Usage,
)
from proxy.core.protocols.responses.context import ResponsesContext
from proxy.core.protocols.responses.encode import ResponsesEncoder
from tests.core.protocols.responses.checker import check


def ids() -> Callable[[], str]:
    counter = itertools.count(1)
    return lambda: f"x{next(counter)}"


STEP = st.one_of(
    st.tuples(st.just("text"), st.text(min_size=1, max_size=5)),
    st.tuples(st.just("reasoning"), st.text(min_size=1, max_size=5)),
    st.tuples(st.just("open"), st.just("")),  # no value: "" keeps every value a str
    st.tuples(st.just("args"), st.text(max_size=5)),
    st.tuples(st.just("close"), st.just("")),
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[StreamEvent], dict[int, str], str]:
    events: list[StreamEvent] = [Started(model="m", created=1)]
    opened: list[int] = []
    closed: set[int] = set()
    args: dict[int, str] = {}
    text = ""
    for kind, value in draw(st.lists(STEP, max_size=30)):
        open_now = [i for i in opened if i not in closed]
        if kind == "text":
            events.append(TextDelta(value))
            text += value
        elif kind == "reasoning":
            events.append(ReasoningDelta(value))
        elif kind == "open":
            index = len(opened)
            opened.append(index)
            args[index] = ""
            events.append(CallOpened(index, f"call_{index}", f"f{index}"))
        elif kind == "args" and open_now:
            index = draw(st.sampled_from(open_now))
            events.append(ArgumentsDelta(index, value))
            args[index] += value
        elif kind == "close" and open_now:
            index = draw(st.sampled_from(open_now))
            events.append(CallClosed(index))
            closed.add(index)
    events += [CallClosed(i) for i in opened if i not in closed]
    reason = FinishReason.TOOL_CALLS if opened else FinishReason.STOP
    events += [Finished(reason), Usage(1, 2), Ended(complete=True)]
    return events, args, text


@given(streams())
def test_any_event_sequence_comes_out_canonical(
    stream: tuple[list[StreamEvent], dict[int, str], str],
):
    events, args, text = stream
    encoder = ResponsesEncoder(ResponsesContext(), ids())
    body = b"".join(b for event in events for b in encoder.feed(event))
    checked = check(body)
    assert [(c["call_id"], c["arguments"]) for c in checked.calls] == [
        (f"call_{i}", a) for i, a in args.items()
    ]
    assert checked.text == text
    assert json.loads(json.dumps(checked.response))["status"] == "completed"


class SlowEncoder(ResponsesEncoder):
    """The encoder without its hot path: every delta through the general one."""

    def _hot(self, event: StreamEvent) -> bytes | None:
        return None


@given(streams())
def test_the_hot_path_writes_the_bytes_the_general_path_would(stream):
    events, _, _ = stream
    bodies = []
    for cls in (ResponsesEncoder, SlowEncoder):
        encoder = cls(ResponsesContext(), ids())
        bodies.append(b"".join(b for event in events for b in encoder.feed(event)))
    assert bodies[0] == bodies[1]
