"""``python -m bench.core --checkout REV``: this tree's core against another's, in one process.

Run one after the other, two tables of the same code swung by 20% on a shared machine (the
load of the other jobs moves between them). Paired, both proxy packages are loaded side by
side in one interpreter (each under its own ``proxy`` modules, swapped in before its runs),
and every round times one run of each in CPU time, the order alternating from round to
round, so that both see the same machine; the figure of each is its best round. The ratios are
what holds still: of the two bests, and the median of every round's own (its two runs, a
moment apart, saw the same load); the microseconds are upper bounds.

``REV`` is a folder holding a ``proxy`` package, or a commit of this repository, whose
``proxy`` folder is taken out once into ~/.cache/toolcall-proxy/checkouts/.

``--checkout A,B,C`` pairs several revisions with this tree in the same rounds (every round
runs each once, the order alternating), each against the first: what a bisection over a
range of commits wants, every revision seeing the same machine as the base.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from bench.core import READS, Run, runner

T = TypeVar("T")
CACHE = Path.home() / ".cache" / "toolcall-proxy" / "checkouts"


@dataclass
class Package:
    """One tree's proxy package, loaded beside the others: its modules, kept out of
    ``sys.modules`` while another's run."""

    name: str
    modules: dict[str, ModuleType]

    def enter(self) -> None:
        for name in [n for n in sys.modules if _ours(n)]:
            del sys.modules[name]
        sys.modules.update(self.modules)


def _ours(name: str) -> bool:
    return name == "proxy" or name.startswith("proxy.")


def checkout(rev: str) -> Path:
    """The folder whose ``proxy`` package is ``rev``'s: ``rev`` itself, or a commit's tree."""
    if Path(rev, "proxy").is_dir():
        return Path(rev)
    commit = subprocess.run(
        ["git", "rev-parse", "--verify", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    folder = CACHE / commit
    if not (folder / "proxy").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "archive", commit, "proxy"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder


def load(name: str, root: Path | None, build: Callable[[], T]) -> tuple[Package, T]:
    """``build()`` with the proxy package of ``root`` (None: the one installed here) imported,
    and that package, set aside."""
    saved = {n: sys.modules.pop(n) for n in list(sys.modules) if _ours(n)}
    if root is not None:
        sys.path.insert(0, str(root))
    try:
        built = build()
        modules = {n: sys.modules[n] for n in list(sys.modules) if _ours(n)}
        origin = getattr(modules["proxy"], "__file__", "") or ""
        if root is not None and not Path(origin).resolve().is_relative_to(root.resolve()):
            raise SystemExit(f"the proxy package came from {origin}, not from {root}")
    finally:
        if root is not None:
            sys.path.remove(str(root))
        for n in [n for n in sys.modules if _ours(n)]:
            del sys.modules[n]
        sys.modules.update(saved)
    return Package(name, modules), built


def paired(runs: list[tuple[Package, Run]], rounds: int) -> list[list[float]]:
    """The CPU seconds of each run in each of ``rounds`` rounds, each round every run once,
    in turn forwards and backwards (the garbage of the round before collected first)."""
    times: list[list[float]] = [[] for _ in runs]
    order = list(range(len(runs)))
    for round_ in range(rounds):
        gc.collect()
        for i in order if round_ % 2 == 0 else reversed(order):
            package, run = runs[i]
            package.enter()
            started = time.process_time()
            run()
            times[i].append(time.process_time() - started)
    return times


def pair_table(rev: str, shapes: list[str], streams: int, rounds: int) -> str:
    """µs per event of ``rev`` (before) and of this tree (after), and after/before, per
    shape and read."""
    root = checkout(rev)

    def build() -> dict[tuple[str, int], tuple[Run, int]]:
        return {(s, n): runner(s, n, streams) for s in shapes for n in READS.values()}

    here = {n: m for n, m in sys.modules.items() if _ours(n)}
    before, before_runs = load(rev, root, build)
    after, after_runs = load("this tree", None, build)
    lines = [
        f"before: {rev} ({root}); after: this tree; us/event, CPU time, best of {rounds} "
        "paired rounds, order alternated (after/before of the bests; the median of the "
        "rounds' own after/before)",
        "",
        "| shape | " + " | ".join(f"{name} a read" for name in READS) + " |",
        "|---|" + "--:|" * len(READS),
    ]
    try:
        for shape in shapes:
            cells = []
            for per_read in READS.values():
                (old, events), (new, _) = before_runs[shape, per_read], after_runs[shape, per_read]
                was, now = paired([(before, old), (after, new)], rounds)
                scale = 1e6 / (streams * events)
                ratios = sorted(b / a for a, b in zip(was, now, strict=True))
                cells.append(
                    f"{min(was) * scale:.2f} → {min(now) * scale:.2f} "
                    f"({min(now) / min(was):.2f}; {ratios[len(ratios) // 2]:.2f})"
                )
            lines.append(f"| {shape} | " + " | ".join(cells) + " |")
    finally:
        for n in [n for n in sys.modules if _ours(n)]:
            del sys.modules[n]
        sys.modules.update(here)
    return "\n".join(lines)


def revs_table(revs: list[str], shapes: list[str], streams: int, rounds: int) -> str:
    """The median of the rounds' own ratios of each of ``revs[1:]`` and of this tree against
    ``revs[0]``, all run in the same rounds, per shape and read."""
    roots = [checkout(rev) for rev in revs]

    def build() -> dict[tuple[str, int], tuple[Run, int]]:
        return {(s, n): runner(s, n, streams) for s in shapes for n in READS.values()}

    here = {n: m for n, m in sys.modules.items() if _ours(n)}
    loaded = [load(rev, root, build) for rev, root in zip(revs, roots, strict=True)]
    loaded.append(load("this tree", None, build))
    names = [*revs[1:], "this tree"]
    lines = [
        f"base: {revs[0]}; us/event of the base (best of {rounds} rounds, CPU time), then per "
        "revision the median of the rounds' own revision/base, all in the same rounds, order "
        "alternated",
        "",
        "| shape | read | base us | " + " | ".join(names) + " |",
        "|---|---|--:|" + "--:|" * len(names),
    ]
    try:
        for shape in shapes:
            for read, per_read in READS.items():
                runs = [(package, built[shape, per_read][0]) for package, built in loaded]
                events = loaded[0][1][shape, per_read][1]
                times = paired(runs, rounds)
                base = times[0]
                cells = []
                for other in times[1:]:
                    ratios = sorted(b / a for a, b in zip(base, other, strict=True))
                    cells.append(f"{ratios[len(ratios) // 2]:.3f}")
                lines.append(
                    f"| {shape} | {read} | {min(base) * 1e6 / (streams * events):.2f} | "
                    + " | ".join(cells)
                    + " |"
                )
    finally:
        for n in [n for n in sys.modules if _ours(n)]:
            del sys.modules[n]
        sys.modules.update(here)
    return "\n".join(lines)
