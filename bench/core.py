"""``python -m bench.core``: the rewriting core alone, in microseconds per event.

The bench's streams (bench/shapes.py) are fed straight to the core's ChatSSEStream, as
the pump feeds them, with no server, socket or event loop: the figure is what the core costs
per upstream event, apart from everything else the proxy does. Reads are cut three ways: one
event a read (a server writing tokens slower than the proxy reads them), ten events a read,
and 1,500 bytes a read cut anywhere (an unthrottled server). Each figure is the best of
``--repeat`` runs of ``--streams`` 100-chunk streams: on a shared machine the minimum is the
figure that holds still.

A second table holds the cost per event still as a stream grows: one stream of each length
of the ``longcall`` and ``manycalls`` shapes (one call of thousands of deltas, thousands of
calls in one choice), in CPU time (long runs on a shared machine), best of ``--repeat``
runs but at most three. A figure that grew with the length would be work that grows with
what came before.

``--checkout REV`` (a commit, or a folder holding a proxy package) pairs that core with this
tree's in one process instead, round after round in CPU time (bench/core_pair.py): one table
of before, after and their ratio.
"""

from __future__ import annotations

import argparse
import inspect
import time
from collections.abc import Callable, Mapping
from typing import Any

from bench.shapes import LENGTH_SHAPES, NO_TOOLS, SHAPES, TOOLS, model_name, templates

READS = {"1 event": 1, "10 events": 10, "1500 bytes": -1500}
Run = Callable[[], None]
# the lengths of the second table, in deltas of the one call or in calls
LENGTHS: dict[str, tuple[int, ...]] = {
    "longcall": (1_000, 10_000, 40_000),
    "manycalls": (1_000, 4_000, 10_000),
}


def stream(shape: str, chunks: int = 100) -> list[bytes]:
    """The shape's events as the fake upstream sends them, with stamps filled in."""
    return [t.event(b"T%016d" % i) for i, t in enumerate(templates(model_name(shape, chunks, 0)))]


def cut(events: list[bytes], per_read: int) -> list[bytes]:
    """Reads of ``per_read`` events, or of ``-per_read`` bytes when it is negative."""
    if per_read < 0:
        body = b"".join(events)
        return [body[i : i - per_read] for i in range(0, len(body), -per_read)]
    return [b"".join(events[i : i + per_read]) for i in range(0, len(events), per_read)]


def per_event_us(
    shape: str,
    per_read: int,
    streams: int,
    repeat: int,
    chunks: int = 100,
    clock: Callable[[], float] = time.perf_counter,
) -> float:
    run, events = runner(shape, per_read, streams, chunks)
    return best(run, repeat, clock) / (streams * events) * 1e6


def runner(shape: str, per_read: int, streams: int, chunks: int = 100) -> tuple[Run, int]:
    """A run of ``streams`` streams of the shape through the core, in reads of ``per_read``,
    and the events of one stream: the classes of the proxy package imported now."""
    # Imported here so that --checkout can put another proxy package first on sys.path.
    try:
        from proxy.core.markup import check_names
        from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
        from proxy.shell.random_ids import new_id_factory

        try:
            from proxy.core.options import UpstreamOptions as NormalizeOptions
        except ImportError:  # a checkout from before the options of one upstream were one object
            from proxy.core.protocols.chat.normalize import (  # type: ignore[attr-defined,no-redef]
                NormalizeOptions,
            )

        try:
            from proxy.core.protocols.chat.sse_stream import ChatSSEStream as SSERewriter
        except ImportError:  # a checkout from before the name ChatSSEStream
            from proxy.core.protocols.chat.rewriter import (  # type: ignore[no-redef,import-not-found]
                SSERewriter,
            )
    except ImportError:  # a checkout from before proxy/core/: the flat layout
        from proxy.dialects import check_names  # type: ignore[no-redef,import-not-found]
        from proxy.ids import new_id_factory  # type: ignore[no-redef,import-not-found]
        from proxy.normalize import (  # type: ignore[no-redef,import-not-found]
            NormalizeOptions,
            RequestInfo,
            StreamNormalizer,
        )

        try:
            from proxy.rewriter import SSERewriter  # type: ignore[no-redef,import-not-found]
        except ImportError:  # a checkout from before the rewriter: its pump's loop instead
            SSERewriter = _DecodeEachEvent  # type: ignore[assignment,misc]

    events = stream(shape, chunks)
    reads = cut(events, per_read)
    options = NormalizeOptions(dialects=check_names(["auto"]))
    request = RequestInfo.from_body({} if shape in NO_TOOLS else {"tools": TOOLS})

    # a checkout from before the options carried max_event_bytes takes it apart
    takes_limit = "max_event_bytes" in inspect.signature(SSERewriter).parameters
    limit = {"max_event_bytes": 1 << 20} if takes_limit else {}

    def run() -> None:
        for _ in range(streams):
            normalizer = StreamNormalizer(options, request, new_id=new_id_factory())
            rewriter = SSERewriter(normalizer, **limit)
            for read in reads:
                rewriter.feed(read)
            rewriter.close(complete=True)

    return run, len(events)


class _DecodeEachEvent:
    """What the pump did before the rewriter: every read decoded, every event fed."""

    # Any: an old checkout's normalizer, whatever its types were.
    def __init__(self, normalizer: Any, *, max_event_bytes: int) -> None:
        try:
            from proxy.core.sse import SSEDecoder
        except ImportError:
            from proxy.sse import SSEDecoder  # type: ignore[no-redef,import-not-found]

        self._normalizer = normalizer
        self._decoder = SSEDecoder(max_event_bytes=max_event_bytes)

    def feed(self, chunk: bytes) -> list[bytes]:
        return [b for item in self._decoder.feed(chunk) for b in self._normalizer.feed(item)]

    def close(self, *, complete: bool) -> list[bytes]:
        out = [b for item in self._decoder.close() for b in self._normalizer.feed(item)]
        closing: list[bytes] = self._normalizer.close(complete=complete)
        return out + closing


def best(run: Callable[[], None], repeat: int, clock: Callable[[], float]) -> float:
    times = []
    for _ in range(repeat):
        started = clock()
        run()
        times.append(clock() - started)
    return min(times)


def table(shapes: list[str], streams: int, repeat: int) -> str:
    lines = [
        "| shape | " + " | ".join(f"{name} a read, us/event" for name in READS) + " |",
        "|---|" + "--:|" * len(READS),
    ]
    for shape in shapes:
        figures = [per_event_us(shape, n, streams, repeat) for n in READS.values()]
        lines.append(f"| {shape} | " + " | ".join(f"{f:.1f}" for f in figures) + " |")
    return "\n".join(lines)


def length_table(
    shapes: list[str], repeat: int, lengths: Mapping[str, tuple[int, ...]] = LENGTHS
) -> str:
    lines = [
        "| shape | length | events | "
        + " | ".join(f"{name} a read, CPU us/event" for name in READS)
        + " |",
        "|---|--:|--:|" + "--:|" * len(READS),
    ]
    for shape in shapes:
        for length in lengths[shape]:
            events = len(stream(shape, length))
            figures = [
                per_event_us(shape, n, 1, repeat, length, time.process_time) for n in READS.values()
            ]
            cells = " | ".join(f"{f:.1f}" for f in figures)
            lines.append(f"| {shape} | {length:,} | {events:,} | {cells} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--streams", type=int, default=60)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument(
        "--lengths",
        default=",".join(LENGTH_SHAPES),
        help="shapes of the second table, cost per event by stream length; '' skips it",
    )
    parser.add_argument(
        "--checkout",
        help="a commit or a folder with a proxy package: pair its core with this tree's "
        "in one process (bench/core_pair.py; the length table is left out); several, "
        "comma-separated: each and this tree against the first, in the same rounds",
    )
    parser.add_argument(
        "--rounds", type=int, default=41, help="paired rounds of --checkout, best of them"
    )
    args = parser.parse_args(argv)
    if args.checkout and "," in args.checkout:
        from bench.core_pair import revs_table

        revs = [r for r in args.checkout.split(",") if r]
        print(revs_table(revs, [s for s in args.shapes.split(",") if s], args.streams, args.rounds))
        return 0
    if args.checkout:
        from bench.core_pair import pair_table

        print(
            pair_table(
                args.checkout, [s for s in args.shapes.split(",") if s], args.streams, args.rounds
            )
        )
        return 0
    shapes = [s for s in args.shapes.split(",") if s]
    by_length = [s for s in args.lengths.split(",") if s]
    unknown = (set(shapes) - set(SHAPES)) | (set(by_length) - set(LENGTH_SHAPES))
    if unknown:
        parser.error(f"unknown shapes: {', '.join(sorted(unknown))}")
    if shapes:
        print(table(shapes, args.streams, args.repeat))
    if by_length:
        print()
        print(length_table(by_length, min(args.repeat, 3)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
