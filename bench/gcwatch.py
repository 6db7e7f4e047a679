"""The garbage collector in a proxy under load: every collection's generation and pause.

Targets ``proxy+gc`` (the proxy as it is), ``proxy+freeze`` (``gc.freeze()`` once the
proxy's modules are imported, before it serves) and ``proxy+thresholdN`` (generation 0's
threshold raised to N) run the proxy under this wrapper: ``python -m bench.gcwatch --out
FILE [--freeze] [--threshold N] -- ARGV...`` times each collection with ``gc.callbacks``
and writes them to FILE when the proxy exits. ``python -m bench.gcwatch FILE...`` sums
them up: collections and pause per generation, the longest pause, and the pauses' p99.
"""

from __future__ import annotations

import argparse
import atexit
import gc
import runpy
import sys
import time
from pathlib import Path
from typing import Any

import orjson

from bench.load import percentile
from bench.targets import Proxy

VARIANTS = ("gc", "freeze", "threshold")


class WatchedProxy(Proxy):
    """The proxy run under the watcher; its table name says which variant."""

    def __init__(self, variant: str) -> None:
        super().__init__()
        kind = variant.rstrip("0123456789")
        if kind not in VARIANTS or (kind == "threshold") == (kind == variant):
            raise SystemExit(f"proxy+{variant}: known are proxy+gc, proxy+freeze, proxy+thresholdN")
        self.variant = variant
        self.name += "+" + variant
        self.gc_log: Path | None = None

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        argv = super().argv(upstream, port, workdir)
        self.gc_log = workdir / f"{self.name}-gc.json"
        wrapper = [sys.executable, "-m", "bench.gcwatch", "--out", str(self.gc_log)]
        if self.variant == "freeze":
            wrapper.append("--freeze")
        elif self.variant.startswith("threshold"):
            wrapper += ["--threshold", self.variant.removeprefix("threshold")]
        return [*wrapper, "--", *argv[3:]]  # argv: python -m proxy ARGS...


def _install(out: Path) -> None:
    pauses: list[tuple[int, int, int]] = []  # (generation, pause in ns, ms since start-up)
    started = [0]
    born = time.perf_counter_ns()

    def callback(phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter_ns()
        if phase == "start":
            started[0] = now
        else:
            pauses.append((info["generation"], now - started[0], (now - born) // 1_000_000))

    gc.callbacks.append(callback)
    atexit.register(lambda: out.write_bytes(orjson.dumps({"pauses": pauses})))


def summary(path: Path) -> str:
    pauses = orjson.loads(path.read_bytes())["pauses"]
    lines = [f"{path.name}: {len(pauses)} collections"]
    for gen in (0, 1, 2):
        mine = [ns for g, ns, _ in pauses if g == gen]
        if mine:
            lines.append(
                f"  gen {gen}: {len(mine)}, total {sum(mine) / 1e6:.1f} ms,"
                f" max {max(mine) / 1e6:.2f} ms, p99 {(percentile(mine, 99) or 0) / 1e6:.2f} ms"
            )
    long = [
        f"{ns / 1e6:.1f} ms (gen {g}, at {at / 1000:.1f} s)" for g, ns, at in pauses if ns > 2e6
    ]
    lines.append("  pauses over 2 ms: " + (", ".join(long) or "none"))
    return "\n".join(lines)


def main() -> None:
    if "--" not in sys.argv:
        for name in sys.argv[1:]:
            print(summary(Path(name)))
        return
    split = sys.argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--freeze", action="store_true")
    parser.add_argument("--threshold", type=int)
    args = parser.parse_args(sys.argv[1:split])
    sys.argv = ["proxy", *sys.argv[split + 1 :]]
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
