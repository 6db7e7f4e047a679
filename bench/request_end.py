"""What every proxied request ends with, per request: ``Metrics.end`` and the access line.

``python -m bench.request_end DIR [DIR ...]`` runs each checkout's (a folder holding a
``proxy`` package: this tree's ``.`` or an unpacked commit) in a process of its own, the
checkouts alternating, ``--rounds`` times, and prints the CPU microseconds per request of
each round and their median: 20,000 ended requests of a 52-chunk rewritten stream recorded
into a fresh Metrics and logged by the access log as ``configure_logging`` sets it up, to
/dev/null (which hides what a write to a pipe costs, one per request before issue 29, one per
loop turn after).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from statistics import median

_ONE = r"""
import asyncio, inspect, sys, time
sys.path.insert(0, sys.argv[1])
import proxy.shell.accesslog as accesslog
import proxy.shell.metrics as metrics_module
from proxy.shell.exchange import Exchange

accesslog.configure_logging("info", open("/dev/null", "w"))
takes_now = len(inspect.signature(metrics_module.Metrics.end).parameters) > 2


def ended(i):
    e = Exchange(request_id=f"r{i}", method="POST", path="/v1/chat/completions",
                 started_at=time.perf_counter())
    e.upstream, e.model, e.status, e.rewritten, e.end = "bench", "m", 200, True, "complete"
    m = e.meter
    at = time.perf_counter()
    m.upstream_headers_at = m.client_headers_at = m.first_in_at = m.first_out_at = at
    m.bytes_in = m.bytes_out = 5000
    m.writes = 52
    return e


async def main(n=20000):
    metrics = metrics_module.Metrics(["bench"])
    exchanges = [ended(i) for i in range(n)]
    t0 = time.process_time()
    for e in exchanges:
        metrics.begin(e)
        if takes_now:
            now = time.perf_counter()
            metrics.end(e, now)
            accesslog.log_exchange(e, now)
        else:
            metrics.end(e)
            accesslog.log_exchange(e)
    print((time.process_time() - t0) / n * 1e6)


asyncio.run(main())
"""


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.request_end", description=__doc__)
    parser.add_argument("checkouts", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    rounds: dict[Path, list[float]] = {c: [] for c in args.checkouts}
    for _ in range(args.rounds):
        for checkout in args.checkouts:
            out = subprocess.run(
                [sys.executable, "-c", _ONE, str(checkout.resolve())],
                capture_output=True,
                text=True,
                check=True,
            )
            rounds[checkout].append(float(out.stdout.strip()))
    print("| checkout | us per request (rounds) | median |\n| --- | --- | --: |")
    for checkout, values in rounds.items():
        shown = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {checkout} | {shown} | {median(values):.1f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
