"""The heap a serving process starts with, kept out of the garbage collector's way.

By the time the proxy serves, it holds objects that live as long as the process: modules,
settings, pydantic's validators, aiohttp's and prometheus-client's tables. Every collection of
the oldest generation walks them all again, and while it does no stream moves: under 100
streams of 20 ms chunks such a collection took 23-28 ms of CPU with them, 5-12 ms without
(docs/performance-history.md, round 3).
``gc.freeze()`` moves them to a generation the collector never scans; what is garbage at that
point is collected first, so nothing is frozen that could have been freed. Forked workers
gain too: a collection no longer writes to the pages they share with the supervisor.
"""

from __future__ import annotations

import gc
import logging

from aiohttp import web

log = logging.getLogger("toolcall_proxy")


def freeze_startup_heap() -> None:
    """Collect what start-up left behind, then keep the rest out of every later collection."""
    gc.collect()
    gc.freeze()
    log.debug("start-up heap frozen: %d objects", gc.get_freeze_count())


async def freeze_on_startup(app: web.Application) -> None:
    """``on_startup`` hook: the app's own start-up (its ClientSession) is done by then."""
    freeze_startup_heap()
