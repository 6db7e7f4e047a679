"""Run the plan: every target against every (shape, load), repeated, one target at a time.

Targets stay up for the whole run and are warmed before the first measurement; a load
marked ``fresh`` (the idle-streams one, which measures memory per open stream; it runs with
the content shape only) restarts the proxies first, so its memory figure is not hidden by
memory an earlier load left behind.
Each measurement reads the target's CPU time before and after a load generator process,
and samples its resident memory while the load runs. Each value of the protocol dimension
(bench/protocols.py) runs every shape and load, against the targets that have its stream.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bench import per_request, procstat, profile
from bench.protocols import PATHS
from bench.shapes import model_name
from bench.targets import ROOT, Target, start_upstream

# The idle-streams load measures memory and errors with many open streams; it runs with one
# shape, whose first stamp comes after one gap (a tool-call shape's markup would take longer
# than the whole load at one chunk a second).
IDLE_SHAPE = "content"


@dataclass(frozen=True)
class Load:
    concurrency: int
    delay_ms: int
    fresh: bool = False


@dataclass
class Plan:
    shapes: list[str]
    loads: list[Load]
    reps: int = 3
    duration: float = 5.0
    idle_duration: float = 10.0
    chunks: int = 100
    max_requests: int = 1_000_000
    warmup: float = 0.5
    profile: str | None = None  # name of a target to sample with py-spy during each load
    profile_dir: str | None = None
    per_request_clients: int = 0  # clients of the per-request load (bench.per_request); 0: none
    extra: dict[str, str] = field(default_factory=dict)
    protocols: list[str] = field(default_factory=lambda: ["chat"])


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _load(
    url: str,
    model: str,
    concurrency: int,
    duration: float,
    max_requests: int,
    protocol: str = "chat",
) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "bench.load", "--url", url, "--model", model]
    argv += ["--concurrency", str(concurrency), "--duration", str(duration)]
    argv += ["--max-requests", str(max_requests), "--protocol", protocol]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT)


def measure(
    target: Target, plan: Plan, shape: str, load: Load, rep: int = 0, stream: str = "chat"
) -> dict[str, object]:
    """One load against one target, with the target's CPU and memory over it."""
    duration = plan.idle_duration if load.fresh else plan.duration
    model = model_name(shape, plan.chunks, load.delay_ms)
    pids = procstat.tree(target.pid) if target.pid else []
    cpu0 = procstat.cpu_seconds(pids)
    rss0 = peak = procstat.rss_bytes(pids)
    protocol = target.speaks(stream)
    if protocol is None:
        raise ValueError(f"{target.name} has no {stream} stream")
    url = target.base + PATHS[protocol]
    proc = _load(url, model, load.concurrency, duration, plan.max_requests, protocol)
    spy = None
    if target.pid and plan.profile == target.name and plan.profile_dir:
        where = f"{stream.replace('/', '-')}-{shape}" if stream != "chat" else shape
        name = f"{target.name}-{where}-{load.concurrency}x{load.delay_ms}-rep{rep}.txt"
        spy = profile.record(target.pid, duration, Path(plan.profile_dir) / name)
    deadline = time.monotonic() + duration + 60
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
        peak = max(peak, procstat.rss_bytes(pids))  # the tree is read again at the end only
    if proc.poll() is None:
        proc.kill()
    out, _ = proc.communicate()
    if spy is not None:
        spy.wait(30)
    if proc.returncode != 0 or not out.strip():
        result: dict[str, object] = {"chunks": 0, "errors": {f"load exit {proc.returncode}": 1}}
    else:
        result = orjson.loads(out)
    pids = procstat.tree(target.pid) if target.pid else []
    cpu = procstat.cpu_seconds(pids) - cpu0 if pids else None
    result.update(cpu_s=cpu, rss_before=rss0 if pids else None, rss_peak=peak if pids else None)
    result["cpu_after_s"] = _settle(pids) if pids else None
    return result


def _settle(pids: list[int], timeout: float = 30.0) -> float:
    """Wait until the target has worked off the load that just ended, so that its work does
    not slow the next measurement (LiteLLM's Messages bridge goes on at a whole core for 2 s
    after 100 clients have gone): until a quarter second holds at most one clock tick of its
    CPU. Returns the CPU seconds it spent meanwhile, which its figures leave out."""
    start = last = procstat.cpu_seconds(pids)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.25)
        now = procstat.cpu_seconds(pids)
        if now - last <= 0.011:
            break
        last = now
    return procstat.cpu_seconds(pids) - start


def _warm(target: Target, plan: Plan) -> None:
    if plan.warmup > 0:
        load = Load(4, 0)
        protocols = {p for s in plan.protocols if (p := target.speaks(s))}
        for protocol in sorted(protocols):
            for shape in plan.shapes:
                model = model_name(shape, plan.chunks, 0)
                url = target.base + PATHS[protocol]
                _load(url, model, load.concurrency, plan.warmup, 1_000_000, protocol).communicate()


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine() -> dict[str, object]:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor(),
    )
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": model,
        "python": platform.python_version(),
        "kernel": platform.release(),
        "packages": {name: _version(name) for name in ("aiohttp", "uvloop", "orjson")},
        "loadavg_before": os.getloadavg(),
    }


def _matrix(plan: Plan) -> list[tuple[str, str, Load]]:
    """(protocol, shape, load) in the order they run; the idle load only with IDLE_SHAPE, and
    only over chat (memory per open stream; each restart of the proxies costs a warm-up)."""
    return [
        (stream, shape, load)
        for stream in plan.protocols
        for shape in plan.shapes
        for load in plan.loads
        if not (load.fresh and shape != IDLE_SHAPE and IDLE_SHAPE in plan.shapes)
        and not (load.fresh and stream != "chat" and "chat" in plan.protocols)
    ]


def _restart(target: Target, plan: Plan, upstream: str, workdir: Path) -> None:
    target.stop()
    target.start(upstream, workdir)
    _warm(target, plan)


def run(
    plan: Plan,
    targets: list[Target],
    workdir: Path,
    progress: Callable[[str], object] = print,
) -> dict[str, Any]:
    """Measure everything (servers' configs and logs go to ``workdir``); returns the raw
    measurements, which report.summarize turns into figures."""
    _raise_fd_limit()
    info = machine()
    # Read before the run: a checkout may change while it runs (a restarted proxy would not).
    info["versions"] = {t.name: v for t in targets if (v := t.version())}
    cells: list[dict[str, object]] = []
    result: dict[str, object] = {}
    upstream = start_upstream(workdir)
    try:
        for target in targets:
            _restart(target, plan, upstream.url, workdir)
        for stream, shape, load in _matrix(plan):
            for rep in range(plan.reps):
                for target in targets:
                    if target.speaks(stream) is None:
                        continue
                    if load.fresh and target.pid:
                        _restart(target, plan, upstream.url, workdir)
                    cell = measure(target, plan, shape, load, rep, stream)
                    cell.update(target=target.name, shape=shape, rep=rep, protocol=stream)
                    cell.update(concurrency=load.concurrency, delay_ms=load.delay_ms)
                    cells.append(cell)
                    progress(_line(cell))
        if plan.per_request_clients:
            result["per_request"] = per_request.run_all(plan, targets, upstream.proc.pid, progress)
    finally:
        for target in targets:
            target.stop()
        upstream.stop()
    info["loadavg_after"] = os.getloadavg()
    return {
        "machine": info,
        "plan": asdict(plan),
        "targets": [t.name for t in targets],
        "cells": cells,
        **result,
    }


def _line(cell: dict[str, Any]) -> str:
    lat = cell.get("latency_ms") or {}
    cpu = cell.get("cpu_s")
    return (
        f"{cell['protocol']:19} {cell['shape']:8} "
        f"{cell['concurrency']:>4} x {cell['delay_ms']:>4} ms "
        f"rep {cell['rep']} {cell['target']:15} {cell.get('chunks_per_s', 0):9.0f} chunks/s "
        f"p50 {lat.get('p50')} ms cpu {cpu} s errors {cell.get('errors')}"
    )
