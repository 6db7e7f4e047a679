"""Send stamps: the upstream's clock reading, carried inside the text of each payload chunk.

The stamp travels in the delta text (content, or tool-call argument characters) rather than
in an extra JSON field, because text is the one thing every proxy must deliver, however it
re-chunks or re-encodes the stream: a rewriting proxy that holds text back delays the stamp
with it, so the measured latency is the latency of the text itself. A stamp is ``T`` and 16
digits of CLOCK_MONOTONIC microseconds (shared by all processes of the machine); it holds
no character that any tool-call markup starts with, and JSON never escapes it.
"""

from __future__ import annotations

import re
import time
from typing import Final

STAMP_LEN: Final = 17
_STAMP: Final = re.compile(rb"T(\d{16})")


def now_us() -> int:
    return time.monotonic_ns() // 1000


def stamp() -> bytes:
    return b"T%016d" % now_us()


class StampScanner:
    """Find stamps in a byte stream read in arbitrary pieces (a stamp may be cut in two)."""

    __slots__ = ("_tail",)

    def __init__(self) -> None:
        self._tail = b""

    def feed(self, data: bytes) -> list[int]:
        buf = self._tail + data if self._tail else data
        found: list[int] = []
        end = 0
        for m in _STAMP.finditer(buf):
            found.append(int(m.group(1)))
            end = m.end()
        # Whatever follows the last stamp can hold at most the start of the next one.
        self._tail = buf[max(end, len(buf) - STAMP_LEN + 1) :]
        return found
