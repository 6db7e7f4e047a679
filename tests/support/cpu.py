"""CPU time of a piece of work, for the suite's few cost-growth guards (ratios, never targets)."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable


def least_cpu_seconds(work: Callable[[], object], repeat: int) -> float:
    """The least CPU time ``work`` took over ``repeat`` runs, with the collector off: a full
    collection walks every object the test process holds (whatever earlier tests imported), so
    a longer run, which triggers more of them, would be charged for the size of the process
    rather than for its own work."""
    gc.collect()
    gc.disable()
    try:
        best = float("inf")
        for _ in range(repeat):
            started = time.process_time()
            work()
            best = min(best, time.process_time() - started)
        return best
    finally:
        gc.enable()
