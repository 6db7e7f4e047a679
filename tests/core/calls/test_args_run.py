"""A run of argument pieces through the driver at once (``Calls.args``, what a held markup
call released whole brings) does what the same pieces do one input each: the same record,
the same counts, the same output, piece for piece, from every state a run can meet."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from itertools import count

from hypothesis import example, given
from hypothesis import strategies as st

from proxy.core.calls.driver import Calls
from proxy.core.calls.record import CallRecord
from proxy.core.calls.state import CallInput, CallState
from proxy.core.ids import IdPool


@dataclass
class Tally:
    ids: IdPool
    fallback_name: str | None = "fallback"
    repairs: Counter[str] = field(default_factory=Counter)
    dropped: list[str] = field(default_factory=list)
    held: int = 0
    kept: int = 0


class Writer:
    """Every piece the driver sends, in order; what is held, as a set (told again, nothing)."""

    def __init__(self) -> None:
        self.log: list[tuple[object, ...]] = []
        self.held: set[int] = set()

    def put_opening(self, call: CallRecord, args: str, out: list[object]) -> None:
        self.log.append(("opening", call.index, call.id, call.name, args))

    def put_held_args(self, call: CallRecord, text: str, out: list[object]) -> None:
        self.log.append(("held args", call.index, text))

    def put_args(self, call: CallRecord, text: str, out: list[object], extras: None) -> None:
        self.log.append(("args", call.index, text))

    def hold_opening(self, call: CallRecord, args: str) -> None:
        self.log.append(("hold opening", call.index, args))

    def release_opening(self, call: CallRecord, out: list[object], *, without_args: bool) -> None:
        self.log.append(("release opening", call.index, without_args))

    def add_extras(self, call: CallRecord, extras: None) -> None:
        self.log.append(("extras", call.index))

    def holding(self, call: CallRecord, out: list[object]) -> None:
        self.held.add(id(call))

    def settled(self, call: CallRecord) -> None:
        self.log.append(("settled", call.index))
        self.held.discard(id(call))


# How the call stands when its run of pieces comes: each a state a run meets (OPEN streams,
# NAMELESS holds, a placeholder is released by the first piece, a suspect or S2 collects, an
# extra call drops).
SETUPS = ("open", "nameless", "placeholder", "suspect", "collecting", "extra")


def drive(setup: str, pieces: list[str], *, run: bool) -> tuple[object, ...]:
    """The call's whole life with its ``pieces`` taken as one run (``run``) or one input
    each, then its end: everything the driver leaves behind."""
    ids = count()
    tally = Tally(IdPool(lambda: f"call_{next(ids)}"))
    writer = Writer()
    coalesce = setup == "collecting"
    calls: Calls[CallRecord, list[object], None] = Calls(
        tally, writer, coalesce=coalesce, dedupe=setup == "suspect", one_call=setup == "extra"
    )
    out: list[object] = []
    if setup in ("suspect", "extra"):  # an earlier call: the one this may repeat, or the first
        first = CallRecord(None, None, name="f")
        calls.records.append(first)
        calls.input(first, calls.naming(first, '{"a": 1}'), '{"a": 1}', out)
        calls.input(first, CallInput.END, "", out)
    call = CallRecord(None, None, from_markup=True)
    calls.records.append(call)
    if setup != "nameless":
        call.name = "f"
        head = "{}" if setup == "placeholder" else ""
        calls.input(call, calls.naming(call, head), head, out)
    before = call.state
    if run:
        calls.args(call, pieces, out)
    else:
        for piece in pieces:
            calls.input(call, CallInput.ARGS, piece, out)
    during = call.state
    calls.input(call, CallInput.END, "", out)
    return (
        before,
        during,
        call.state,
        call.text(),
        call.args_len,
        call.waited,
        call.placeholder_args,
        call.index,
        call.id,
        call.name,
        writer.log,
        writer.held,
        tally.held,
        tally.kept,
        tally.repairs,
        tally.dropped,
        list(calls.placeholders),
        list(calls.suspects),
    )


def cut(text: str, points: list[int]) -> list[str]:
    at = sorted({min(p, len(text)) for p in points})
    return [text[a:b] for a, b in zip([0, *at], [*at, len(text)], strict=True)]


@given(
    setup=st.sampled_from(SETUPS),
    text=st.text(alphabet='{}[]":, ab\\1', max_size=40),
    points=st.lists(st.integers(min_value=0, max_value=40), max_size=12),
)
@example(setup="placeholder", text='{"a": 1}', points=[1, 3])
@example(setup="placeholder", text=', "b"', points=[0, 2])
@example(setup="open", text=' "T1" "T2" "T3"', points=[0, 4, 9, 9])
def test_a_run_of_argument_pieces_is_each_piece_in_turn(setup: str, text: str, points: list[int]):
    pieces = cut(text, points)
    assert drive(setup, pieces, run=True) == drive(setup, pieces, run=False)


def test_a_run_keeps_every_piece_its_own_delta_in_order():
    one_each = drive("open", ["{", '"q": ', '"x"', "}"], run=True)
    assert one_each[0] is CallState.OPEN
    sent = [entry for entry in one_each[10] if entry[0] == "args"]  # type: ignore[attr-defined]
    assert sent == [("args", 0, "{"), ("args", 0, '"q": '), ("args", 0, '"x"'), ("args", 0, "}")]
