"""The garbage collector in a proxy under load: every collection's generation and pause.

Targets ``proxy+gc`` (the proxy as it is), ``proxy+freeze`` (``gc.freeze()`` once the
proxy's modules are imported, before it serves) and ``proxy+thresholdN`` (generation 0's
threshold raised to N), each also ``...@DIR`` (another checkout), run the proxy under
bench/gc_wrapper.py, which times each collection with ``gc.callbacks``. ``python -m
bench.gcwatch FILE...`` sums a run's files up: collections, pause and CPU time per
generation, and every pause over 2 ms with the time it came.
"""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from bench.load import percentile
from bench.targets import Proxy

VARIANTS = ("gc", "freeze", "threshold")
WRAPPER = Path(__file__).with_name("gc_wrapper.py")


class WatchedProxy(Proxy):
    """The proxy run under the wrapper; its table name says which variant."""

    def __init__(self, spec: str) -> None:
        variant, _, root = spec.partition("@")
        super().__init__(Path(root).resolve() if root else None)
        kind = variant.rstrip("0123456789")
        if kind not in VARIANTS or (kind == "threshold") == (kind == variant):
            raise SystemExit(f"proxy+{spec}: known are proxy+gc, proxy+freeze, proxy+thresholdN")
        self.variant = variant
        self.name += "+" + variant
        self.gc_log: Path | None = None

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        argv = super().argv(upstream, port, workdir)
        self.gc_log = workdir / f"{self.name}-gc.json"
        wrapper = [sys.executable, str(WRAPPER), "--out", str(self.gc_log)]
        if self.variant == "freeze":
            wrapper.append("--freeze")
        elif self.variant.startswith("threshold"):
            wrapper += ["--threshold", self.variant.removeprefix("threshold")]
        return [*wrapper, "--", *argv[3:]]  # argv: python -m proxy ARGS...


def summary(path: Path) -> str:
    pauses = orjson.loads(path.read_bytes())["pauses"]
    lines = [f"{path.name}: {len(pauses)} collections"]
    for gen in (0, 1, 2):
        wall = [ns for g, ns, _, _ in pauses if g == gen]
        cpu = [ns for g, _, ns, _ in pauses if g == gen]
        if wall:
            lines.append(
                f"  gen {gen}: {len(wall)}, total {sum(wall) / 1e6:.1f} ms"
                f" (CPU {sum(cpu) / 1e6:.1f}), max {max(wall) / 1e6:.2f} ms"
                f" (CPU {max(cpu) / 1e6:.2f}), p99 {(percentile(wall, 99) or 0) / 1e6:.2f} ms"
            )
    long = [
        f"{ns / 1e6:.1f} ms (CPU {cpu / 1e6:.1f}, gen {g}, at {at / 1000:.1f} s)"
        for g, ns, cpu, at in pauses
        if ns > 2e6
    ]
    lines.append("  pauses over 2 ms: " + (", ".join(long) or "none"))
    return "\n".join(lines)


def main() -> None:
    for name in sys.argv[1:]:
        print(summary(Path(name)))


if __name__ == "__main__":
    main()
