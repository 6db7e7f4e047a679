"""Running the streaming normalizer over bytes, the way the aiohttp shell drives it (through
proxy.core.protocols.chat.sse_stream, whose whole-read fast path the reads cut at event boundaries take)."""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Callable, Iterable, Sequence

from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream


def counting_ids() -> Callable[[], str]:
    """Deterministic ids of 9 letters and digits, like the real factory's."""
    counter = itertools.count(1)
    return lambda: f"call{next(counter):05d}"


def cut(data: bytes, points: Iterable[int]) -> list[bytes]:
    edges = [0, *sorted({p % (len(data) + 1) for p in points}), len(data)]
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


def eventwise(data: bytes, group: int = 1) -> list[bytes]:
    """Reads of ``group`` whole events each, as an upstream writes them."""
    events = [part for part in re.split(rb"(?<=\n\n)", data) if part]
    return [b"".join(events[i : i + group]) for i in range(0, len(events), group)]


def random_cuts(data: bytes, seed: str, count: int = 8) -> list[list[bytes]]:
    rng = random.Random(seed)
    return [
        cut(data, [rng.randrange(len(data) + 1) for _ in range(rng.randint(1, 12))])
        for _ in range(count)
    ]


def run(
    pieces: Sequence[bytes] | bytes,
    *,
    options: UpstreamOptions | None = None,
    request: RequestInfo | None = None,
    complete: bool = True,
) -> tuple[bytes, StreamNormalizer]:
    """Decode and normalize the upstream's reads; the client's bytes and the normalizer."""
    if isinstance(pieces, bytes):
        pieces = [pieces]
    normalizer = StreamNormalizer(
        options or UpstreamOptions(), request or RequestInfo(), new_id=counting_ids()
    )
    rewriter = ChatSSEStream(normalizer)
    out: list[bytes] = []
    for piece in pieces:
        out += rewriter.feed(piece)
    out += rewriter.close(complete=complete)
    return b"".join(out), normalizer
