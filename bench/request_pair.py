"""A before/after pair of the proxy's CPU per request, finer than bench.request_cost resolves.

``python -m bench.request_pair BEFORE AFTER`` (each a folder holding a ``proxy`` package:
an unpacked commit, or ``.``) starts the fake upstream, the bare aiohttp floor and both
checkouts' proxies, all at once, then ``--rounds`` times, the targets' order rotating each
round, sends each of them ``--requests`` sequential requests (one client, one kept-alive
connection: a 1-chunk stream, then a JSON completion) and reads each target's CPU over them
(its process, /proc). Per answer it prints each target's CPU per request (median of the
rounds), and the medians of the per-round ratios: after / before, and each proxy / the
floor. A round's targets run back to back, so a machine shared with other work slows a
round's pair alike, and the ratio of a round is what the pair says; at 2,000 requests a
clock tick (10 ms) is 5 us of a request.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from statistics import median

from bench import procstat, targets
from bench.request_cost import _client, _run
from bench.shapes import model_name

ANSWERS = (("stream-1", True), ("json", False))


def _cpu(target: targets.Target) -> float:
    assert target.pid is not None
    return procstat.cpu_seconds(procstat.tree(target.pid))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=2000)
    args = p.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="request_pair-"))
    upstream = targets.start_upstream(work)
    chosen = [targets.Bare(), targets.Proxy(args.before.resolve())]
    chosen.append(targets.Proxy(args.after.resolve()))
    chosen[1].name, chosen[2].name = "before", "after"
    per: dict[tuple[str, str], list[float]] = {}
    try:
        for target in chosen:
            target.start(upstream.url, work)
        for round_ in range(args.rounds):
            order = chosen[round_ % 3 :] + chosen[: round_ % 3]
            for answer, stream in ANSWERS:
                for target in order:
                    argv = _client(target, "--mode", "sequential", "--warmup", "50")
                    argv += ["--model", model_name("content", 1, 0)]
                    argv += ["--requests", str(args.requests)] + ([] if stream else ["--json"])
                    before = _cpu(target)
                    out, _ = _run(argv, 600)
                    if out.get("errors"):
                        raise SystemExit(f"{target.name} {answer}: {out['errors']}")
                    us = (_cpu(target) - before) / (args.requests + 50) * 1e6
                    per.setdefault((answer, target.name), []).append(us)
            print(f"round {round_ + 1} done", file=sys.stderr, flush=True)
    finally:
        for target in chosen:
            target.stop()
        upstream.stop()
    for answer, _ in ANSWERS:
        rows = {t.name: per[(answer, t.name)] for t in chosen}
        print(f"{answer}: CPU us per request, median of {args.rounds} rounds")
        for name, values in rows.items():
            shown = ", ".join(f"{v:.0f}" for v in values)
            print(f"  {name:14s} {median(values):7.1f}  ({shown})")
        ratio = [a / b for a, b in zip(rows["after"], rows["before"], strict=True)]
        rounds = ", ".join(f"{r:.3f}" for r in ratio)
        print(f"  after / before: {median(ratio):.3f} (rounds: {rounds})")
        for name in ("before", "after"):
            floor = [a / b for a, b in zip(rows[name], rows["bare aiohttp"], strict=True)]
            print(f"  {name} / floor: {median(floor):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
