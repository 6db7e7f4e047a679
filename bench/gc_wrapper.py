"""Run the proxy with every garbage collection timed (bench.gcwatch starts it this way).

``python bench/gc_wrapper.py --out FILE [--freeze] [--threshold N] -- PROXY-ARGS...`` runs
``python -m proxy PROXY-ARGS`` in this process, as if started from the current directory
(the checkout under test), with a ``gc.callbacks`` hook; FILE gets each collection's
generation, wall-clock pause, CPU time and time since start-up when the proxy exits. It is
run as a file, and imports nothing of bench/, because the checkout under test may be one
without it.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import orjson


def _install(out: Path) -> None:
    # (generation, pause ns, CPU ns, ms since start-up): the pause is wall-clock time, which a
    # busy machine stretches; the CPU time is the collector's own work.
    pauses: list[tuple[int, int, int, int]] = []
    started = [0, 0]
    born = time.perf_counter_ns()

    def callback(phase: str, info: dict[str, Any]) -> None:
        now, cpu = time.perf_counter_ns(), time.thread_time_ns()
        if phase == "start":
            started[:] = now, cpu
        else:
            took = now - started[0]
            pauses.append((info["generation"], took, cpu - started[1], (now - born) // 10**6))

    gc.callbacks.append(callback)
    atexit.register(lambda: out.write_bytes(orjson.dumps({"pauses": pauses})))


def main() -> None:
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--freeze", action="store_true")
    parser.add_argument("--threshold", type=int)
    args = parser.parse_args(sys.argv[1:split])
    sys.argv = ["proxy", *sys.argv[split + 1 :]]
    sys.path[0] = os.getcwd()  # as ``python -m proxy`` would: the checkout's own package
    if args.threshold:
        gc.set_threshold(args.threshold, *gc.get_threshold()[1:])
    if args.freeze:
        import proxy.cli
        import proxy.shell.app  # noqa: F401  (the modules a serving proxy holds)

        gc.collect()
        gc.freeze()
    _install(args.out)
    runpy.run_module("proxy", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
