"""Per-request cost: C clients sending requests back to back, each answered in one chunk.

``python -m bench --per-request`` (with ``--loads ''`` for nothing else) measures what a
request costs a target apart from its chunks, the way TensorZero and LiteLLM publish their
overhead: each answer is a 1-chunk stream (``stream``: the role, one stamped content chunk,
the finish and ``[DONE]``) or a non-streaming JSON completion (``json``), so the work per
request (routing, headers, the upstream request, the access line, metrics) is all there is.
The figures: requests/s after a short ramp, CPU ms per request of the target's process tree
(and of the upstream and the load generator beside it, which share the machine's cores),
and the latency of a whole request (sent to last byte read) at p50/p99.

``python -m bench.per_request --url U --model M --answer stream|json --clients C
--duration S`` is the load generator (its own process); it prints one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import subprocess
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median
from typing import TYPE_CHECKING, Any

import aiohttp
import orjson

from bench import procstat, profile, serve
from bench.load import API_KEY, client_session, percentile
from bench.shapes import TOOLS, model_name
from bench.stamps import StampScanner, now_us
from bench.targets import ROOT

if TYPE_CHECKING:
    from collections.abc import Callable

    from bench.runner import Plan
    from bench.targets import Target

ANSWERS = ("stream", "json")
SHAPE = "content"  # a request that offers tools, as an agent's does; one content chunk back
PATH = "/v1/chat/completions"
_HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}


@dataclass
class Tally:
    latency_us: list[int] = field(default_factory=list)
    steady_from: int = 0  # requests finishing before this time (us) are not counted in req/s
    steady: int = 0
    started: int = 0
    completed: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def _check(status: int, data: bytes, stream: bool) -> str | None:
    """What is wrong with an answer, or None: status 200, its one stamp, a whole stream."""
    if status != 200:
        return f"status {status}"
    if stream and not data.rstrip().endswith(b"data: [DONE]"):
        return "no [DONE]"
    if len(StampScanner().feed(data)) != 1:
        return "stamp lost"
    return None


async def _client(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    stream: bool,
    deadline: int,
    delay: float,
    t: Tally,
) -> None:
    await asyncio.sleep(delay)
    while now_us() < deadline:
        t.started += 1
        t0 = now_us()
        try:
            async with session.post(url, data=body, headers=_HEADERS) as resp:
                data = await resp.read()
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            t.errors[type(e).__name__] += 1
            await asyncio.sleep(0.01)  # a refused connection must not turn into a busy loop
            continue
        t1 = now_us()
        if (error := _check(resp.status, data, stream)) is not None:
            t.errors[error] += 1
            continue
        t.completed += 1
        t.latency_us.append(t1 - t0)
        if t1 >= t.steady_from:
            t.steady += 1


async def run_load(
    url: str, model: str, answer: str, clients: int, duration: float
) -> dict[str, Any]:
    stream = answer == "stream"
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    body = orjson.dumps({"model": model, "stream": stream, "messages": messages, "tools": TOOLS})
    t = Tally()
    async with client_session() as session:
        start = now_us()
        deadline = start + int(duration * 1e6)
        ramp = duration / 10
        t.steady_from = start + int(ramp * 1e6)
        tasks = [
            asyncio.create_task(
                _client(session, url, body, stream, deadline, i * ramp / clients, t)
            )
            for i in range(clients)
        ]
        _, pending = await asyncio.wait(tasks, timeout=duration + 30)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = (now_us() - start) / 1e6
    steady = min(elapsed, duration) - ramp
    return {
        "clients": clients,
        "duration_s": elapsed,
        "started": t.started,
        "completed": t.completed,
        "requests_per_s": t.steady / steady if steady > 0 else None,
        "latency_ms": {
            q: None if (v := percentile(t.latency_us, float(q[1:]))) is None else v / 1000
            for q in ("p50", "p99")
        },
        "errors": dict(t.errors),
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _client_process(url: str, answer: str, clients: int, duration: float) -> list[str]:
    argv = [sys.executable, "-m", "bench.per_request", "--url", url, "--answer", answer]
    argv += ["--model", model_name(SHAPE, 1, 0), "--clients", str(clients)]
    return [*argv, "--duration", str(duration)]


def measure(
    target: Target, answer: str, plan: Plan, upstream_pid: int, rep: int = 0
) -> dict[str, Any]:
    """One per-request load against one target, with the CPU of every process it took."""
    pids = procstat.tree(target.pid) if target.pid else []
    cpu0, up0 = procstat.cpu_seconds(pids), procstat.cpu_seconds([upstream_pid])
    argv = _client_process(target.base + PATH, answer, plan.per_request_clients, plan.duration)
    client0 = _children_cpu()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT)
    spy = None
    if target.pid and plan.profile == target.name and plan.profile_dir:
        name = f"{target.name}-per-request-{answer}-rep{rep}.txt"
        spy = profile.record(target.pid, plan.duration, Path(plan.profile_dir) / name)
    try:
        out, _ = proc.communicate(timeout=plan.duration + 60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
    client_cpu = _children_cpu() - client0  # read before py-spy, another child, is reaped
    if spy is not None:
        spy.wait(30)
    if proc.returncode != 0 or not out.strip():
        cell: dict[str, Any] = {"completed": 0, "errors": {f"load exit {proc.returncode}": 1}}
    else:
        cell = orjson.loads(out)
    pids = procstat.tree(target.pid) if target.pid else []
    cell["cpu_s"] = procstat.cpu_seconds(pids) - cpu0 if pids else None
    cell["upstream_cpu_s"] = procstat.cpu_seconds([upstream_pid]) - up0
    cell["client_cpu_s"] = client_cpu
    cell.update(target=target.name, answer=answer, rep=rep)
    return cell


def run_all(
    plan: Plan, targets: list[Target], upstream_pid: int, progress: Callable[[str], object]
) -> list[dict[str, Any]]:
    """Every answer kind, repeated, each repetition every target in turn (paired runs)."""
    targets = [t for t in targets if t.speaks("chat") is not None]  # not the native twins
    for target in targets:
        for answer in ANSWERS:
            if plan.warmup > 0:
                argv = _client_process(target.base + PATH, answer, 4, plan.warmup)
                subprocess.run(argv, stdout=subprocess.DEVNULL, stdin=subprocess.DEVNULL, cwd=ROOT)
    cells = []
    for answer in ANSWERS:
        for rep in range(plan.reps):
            for target in targets:
                cell = measure(target, answer, plan, upstream_pid, rep)
                cells.append(cell)
                progress(_line(cell))
    return cells


def _line(cell: dict[str, Any]) -> str:
    lat = cell.get("latency_ms") or {}
    return (
        f"per-request {cell['answer']:6} rep {cell['rep']} {cell['target']:15} "
        f"{cell.get('requests_per_s') or 0:7.0f} req/s p50 {lat.get('p50')} ms "
        f"cpu {cell['cpu_s']} s errors {cell.get('errors')}"
    )


def _per_request_ms(cpu: float | None, cell: dict[str, Any]) -> float | None:
    done = cell.get("completed") or 0
    return None if cpu is None or not done else 1000 * cpu / done


def summarize(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (answer, target): the median of each figure over the repetitions."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        groups[(c["answer"], c["target"])].append(c)
    rows = []
    for (answer, target), reps in groups.items():
        figures = {
            "requests_per_s": [c.get("requests_per_s") for c in reps],
            "cpu_ms": [_per_request_ms(c["cpu_s"], c) for c in reps],
            "others_cpu_ms": [
                _per_request_ms(c["upstream_cpu_s"] + c["client_cpu_s"], c) for c in reps
            ],
            "p50_ms": [(c.get("latency_ms") or {}).get("p50") for c in reps],
            "p99_ms": [(c.get("latency_ms") or {}).get("p99") for c in reps],
        }
        row: dict[str, Any] = {"answer": answer, "target": target}
        for key, values in figures.items():
            known = [v for v in values if v is not None]
            row[key] = median(known) if known else None
        row["errors"] = sum(sum((c.get("errors") or {}).values()) for c in reps)
        rows.append(row)
    return rows


FLOOR = "bare aiohttp"


def markdown(rows: list[dict[str, Any]], clients: int) -> str:
    """The per-request table, each target's CPU per request also as a multiple of the floor's."""
    floor = {r["answer"]: r["cpu_ms"] for r in rows if r["target"] == FLOOR}
    head = "| answer | target | requests/s | CPU ms / request | x bare | requests / CPU s |"
    head += " p50 ms | p99 ms | upstream + client CPU ms / request | errors |"
    out = [f"#### Per request ({clients} clients, 1-chunk answers)\n", head]
    out.append("|---|---|" + "--:|" * 8)
    for r in rows:
        cpu, base = r["cpu_ms"], floor.get(r["answer"])
        cells = [
            r["answer"],
            r["target"],
            _fmt(r["requests_per_s"], "{:.0f}"),
            _fmt(cpu, "{:.3f}"),
            _fmt(cpu / base if cpu is not None and base else None, "{:.2f}"),
            _fmt(1000 / cpu if cpu else None, "{:.0f}"),
            _fmt(r["p50_ms"], "{:.2f}"),
            _fmt(r["p99_ms"], "{:.2f}"),
            _fmt(r["others_cpu_ms"], "{:.3f}"),
            str(r["errors"]),
        ]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """Issue #18's per-request target: the proxy within 1.3x the floor's CPU per request."""
    at = {(r["answer"], r["target"]): r for r in rows}
    out = []
    for answer in ANSWERS:
        proxy, floor = at.get((answer, "toolcall-proxy")), at.get((answer, FLOOR))
        if proxy and floor and proxy["cpu_ms"] is not None and floor["cpu_ms"]:
            x = proxy["cpu_ms"] / floor["cpu_ms"]
            verdict = "met" if x <= 1.3 else "MISSED"
            out.append(
                f"- {verdict}: per request ({answer}): CPU {x:.2f}x the bare proxy's (at most 1.3x)"
            )
    return out


def _fmt(value: float | None, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="full chat completions URL")
    parser.add_argument("--model", required=True)
    parser.add_argument("--answer", choices=ANSWERS, default="stream")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    args = parser.parse_args()

    async def go() -> None:
        result = await run_load(args.url, args.model, args.answer, args.clients, args.duration)
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")

    serve.run(go())


if __name__ == "__main__":
    main()
