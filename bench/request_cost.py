"""The cost of a request (issue 29): at one client, in a burst, and in a gateway benchmark's shape.

``python -m bench.request_cost`` starts the fake upstream, the bare aiohttp floor, nginx
(when installed; ``--install`` fetches Debian's) and the proxy, and prints one table per
part, every target side by side in one run, each repetition going through the targets in
turn (the order rotating), so that a machine shared with other work slows them alike:

- **One client**: sequential requests on one kept-alive connection (``--requests`` after a
  warm-up), each answer kind in turn: a 50-chunk tool-call stream at 0 ms, a 1-chunk stream,
  a JSON completion. Per request: the whole request and its first body byte at p50/p99, and
  the target's CPU (its process tree, /proc) per request. Per token: the slope of the
  request's p50 between a 50- and a 250-chunk tool-call stream, per chunk, minus direct's.
- **A burst**: 100 and 500 streams (tool call, 50 chunks at 20 ms) started at one instant
  on fresh connections; time to the first byte at p50/p99, and the streams that failed; for
  the proxy also the part of it spent in its handler (its access lines' ``ttfb_ms``: from
  the request parsed to its first body byte sent, the upstream's connect and answer
  included), so the rest is accepting, parsing and waiting for the loop.
- **The gateway shape**: concurrency 1, 8, 64 and 512 streams back to back (bench.load:
  tool call, 50 chunks at 20 ms), the latency each token adds over direct at p50/p99, the
  throughput against direct's, and the load generator's own CPU share: a Python client on
  the same two cores saturates before the proxy does, and the table says where.

``--quick`` (about 2 minutes): fewer requests, one repetition, shorter gateway loads.
``--targets proxy@DIR`` adds the proxy of another checkout (a before/after pair in one run).
``python -m bench.request_cost client ...`` is the one-client and burst load generator (its
own process, one JSON line out).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from statistics import median
from typing import Any, Final

import aiohttp
import orjson

from bench import procstat, serve, targets
from bench.load import API_KEY, percentile
from bench.shapes import TOOLS, model_name
from bench.stamps import now_us

PATH: Final = "/v1/chat/completions"
_HEADERS: Final = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
#: the one-client answers: (name, shape, chunks, stream)
ANSWERS: Final = (
    ("toolcall-50", "toolcall", 50, True),
    ("stream-1", "content", 1, True),
    ("json", "content", 1, False),
    ("toolcall-250", "toolcall", 250, True),
)
SHORT, LONG = "toolcall-50", "toolcall-250"
BURSTS: Final = (100, 500)
GATEWAY: Final = (1, 8, 64, 512)
FLOOR: Final = "bare aiohttp"


# --- the load generator (a process of its own) ---------------------------------------------


def _body(model: str, stream: bool) -> bytes:
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    return orjson.dumps({"model": model, "stream": stream, "messages": messages, "tools": TOOLS})


async def _one(
    session: aiohttp.ClientSession, url: str, body: bytes, stream: bool
) -> tuple[int, int]:
    """One request: (first body byte, last byte) in us after it was sent; raises on failure."""
    t0 = now_us()
    first = 0
    async with session.post(url, data=body, headers=_HEADERS) as resp:
        tail = b""
        async for data in resp.content.iter_any():
            if not first:
                first = now_us() - t0
            tail = (tail + data)[-32:]
        status = resp.status
    total = now_us() - t0
    if status != 200:
        raise ValueError(f"status {status}")
    if stream and not tail.rstrip().endswith(b"data: [DONE]"):
        raise ValueError("no [DONE]")
    return first, total


async def sequential(
    url: str, model: str, stream: bool, requests: int, warmup: int
) -> dict[str, Any]:
    body = _body(model, stream)
    ttfb: list[int] = []
    total: list[int] = []
    errors: dict[str, int] = {}
    connector = aiohttp.TCPConnector(limit=1)
    async with aiohttp.ClientSession(connector=connector) as session:
        for i in range(warmup + requests):
            try:
                first, whole = await _one(session, url, body, stream)
            except (ValueError, aiohttp.ClientError, OSError) as e:
                errors[str(e) or type(e).__name__] = errors.get(str(e) or type(e).__name__, 0) + 1
                continue
            if i >= warmup:
                ttfb.append(first)
                total.append(whole)
    return {"ttfb_us": ttfb, "total_us": total, "errors": errors}


async def burst(url: str, model: str, streams: int) -> dict[str, Any]:
    """``streams`` requests sent at one instant, each on a new connection."""
    body = _body(model, True)
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    timeout = aiohttp.ClientTimeout(total=60, sock_connect=30)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        results = await asyncio.gather(
            *(_one(session, url, body, True) for _ in range(streams)), return_exceptions=True
        )
    ttfb = [r[0] for r in results if isinstance(r, tuple)]
    errors: dict[str, int] = {}
    for r in results:
        if isinstance(r, BaseException):
            errors[str(r) or type(r).__name__] = errors.get(str(r) or type(r).__name__, 0) + 1
    return {"ttfb_us": ttfb, "errors": errors}


def _client_main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.request_cost client")
    p.add_argument("--url", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--mode", choices=("sequential", "burst"), required=True)
    p.add_argument("--json", action="store_true", help="stream: false")
    p.add_argument("--requests", type=int, default=300)
    p.add_argument("--warmup", type=int, default=30)
    p.add_argument("--streams", type=int, default=100)
    args = p.parse_args(argv)

    async def go() -> None:
        if args.mode == "sequential":
            out = await sequential(args.url, args.model, not args.json, args.requests, args.warmup)
        else:
            out = await burst(args.url, args.model, args.streams)
        sys.stdout.buffer.write(orjson.dumps(out) + b"\n")

    _raise_fd_limit()
    serve.run(go())


# --- the runner ------------------------------------------------------------------------------


def _raise_fd_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _run(argv: list[str], timeout: float) -> tuple[dict[str, Any], float]:
    """A load generator's JSON line and its CPU seconds."""
    before = _children_cpu()
    proc = subprocess.run(
        argv, capture_output=True, stdin=subprocess.DEVNULL, cwd=targets.ROOT, timeout=timeout
    )
    cpu = _children_cpu() - before
    if proc.returncode != 0 or not proc.stdout.strip():
        return {
            "errors": {f"load exit {proc.returncode}": 1},
            "stderr": proc.stderr[-500:].decode(),
        }, cpu
    return orjson.loads(proc.stdout), cpu


def _client(target: targets.Target, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "bench.request_cost",
        "client",
        "--url",
        target.base + PATH,
        *args,
    ]


def _cpu(target: targets.Target) -> float | None:
    return procstat.cpu_seconds(procstat.tree(target.pid)) if target.pid else None


def _q(values: list[int], q: float) -> float | None:
    v = percentile(values, q)
    return None if v is None else v / 1000  # ms


def one_client(target: targets.Target, requests: int, warmup: int) -> dict[str, Any]:
    cell: dict[str, Any] = {}
    for name, shape, chunks, stream in ANSWERS:
        argv = _client(target, "--mode", "sequential", "--model", model_name(shape, chunks, 0))
        argv += ["--requests", str(requests), "--warmup", str(warmup)]
        argv += [] if stream else ["--json"]
        cpu0 = _cpu(target)
        out, _ = _run(argv, 300)
        cpu1 = _cpu(target)
        done = len(out.get("total_us", []))
        cell[name] = {
            "total_ms": {
                "p50": _q(out.get("total_us", []), 50),
                "p99": _q(out.get("total_us", []), 99),
            },
            "ttfb_ms": {
                "p50": _q(out.get("ttfb_us", []), 50),
                "p99": _q(out.get("ttfb_us", []), 99),
            },
            # the warm-up's CPU is in the figure too: per request of all that were sent
            "cpu_ms": None
            if cpu0 is None or cpu1 is None or not done
            else 1000 * (cpu1 - cpu0) / (done + warmup),
            "errors": sum(out.get("errors", {}).values()),
        }
    return cell


def _log_size(target: targets.Target) -> int:
    return target.server.log.stat().st_size if target.server else 0


def _own_ttfb(target: targets.Target, offset: int) -> list[int]:
    """The proxy's own time to the first byte (its access lines' ``ttfb_ms``: from its handler
    taking the request to the first body byte sent), in us, of the lines after ``offset``."""
    if target.server is None or not isinstance(target, targets.Proxy):
        return []
    with target.server.log.open("rb") as log:
        log.seek(offset)
        lines = log.read().splitlines()
    found = []
    for line in lines:
        if line.startswith(b"{") and b'"ttfb_ms"' in line:
            ttfb = orjson.loads(line).get("ttfb_ms")
            if isinstance(ttfb, (int, float)):
                found.append(int(ttfb * 1000))
    return found


def burst_cell(target: targets.Target, streams: int) -> dict[str, Any]:
    argv = _client(target, "--mode", "burst", "--model", model_name("toolcall", 50, 20))
    offset = _log_size(target)
    out, _ = _run([*argv, "--streams", str(streams)], 120)
    time.sleep(0.2)  # the last access lines, held up to one loop turn
    ttfb = out.get("ttfb_us", [])
    own = _own_ttfb(target, offset)
    return {
        "ttfb_ms": {"p50": _q(ttfb, 50), "p99": _q(ttfb, 99)},
        # where the time goes: from the handler's start (parsed, routed) to the first byte
        "handler_ttfb_ms": {"p50": _q(own, 50), "p99": _q(own, 99)} if own else None,
        "failed": streams - len(ttfb),
    }


def gateway_cell(target: targets.Target, concurrency: int, duration: float) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.load", "--url", target.base + PATH]
    argv += ["--model", model_name("toolcall", 50, 20), "--concurrency", str(concurrency)]
    argv += ["--duration", str(duration)]
    cpu0 = _cpu(target)
    out, client_cpu = _run(argv, duration + 60)
    cpu1 = _cpu(target)
    return {
        "chunks_per_s": out.get("chunks_per_s"),
        "token_ms": out.get("latency_ms", {}),
        "ttfb_ms": out.get("ttfb_ms", {}),
        "errors": sum(out.get("errors", {}).values()),
        "client_cpu_share": client_cpu / duration,
        "target_cpu_share": None if cpu0 is None or cpu1 is None else (cpu1 - cpu0) / duration,
    }


def _rotated(items: list[targets.Target], rep: int) -> list[targets.Target]:
    k = rep % len(items)
    return items[k:] + items[:k]


def run(
    args: argparse.Namespace,
    chosen: list[targets.Target],
    workdir: Path,
    say: Callable[[str], object],
) -> dict[str, Any]:
    upstream = targets.start_upstream(workdir)
    cells: list[dict[str, Any]] = []
    try:
        for t in chosen:
            t.start(upstream.url, workdir)
        for t in chosen:  # warm every target up (imports, first connections, caches)
            one_client(t, 20, 5)
        for rep in range(args.reps):
            for t in _rotated(chosen, rep) if "one" in args.parts else ():
                cells.append(
                    {
                        "part": "one",
                        "target": t.name,
                        "rep": rep,
                        **one_client(t, args.requests, args.warmup),
                    }
                )
                say(f"one client  rep {rep} {t.name}")
            for streams in BURSTS if "burst" in args.parts else ():
                for t in _rotated(chosen, rep):
                    cells.append(
                        {
                            "part": "burst",
                            "target": t.name,
                            "rep": rep,
                            "streams": streams,
                            **burst_cell(t, streams),
                        }
                    )
                    say(f"burst {streams} rep {rep} {t.name}: {cells[-1]['ttfb_ms']}")
                    time.sleep(0.5)  # the closed connections' TIME_WAIT and the upstream's tail
        for concurrency in GATEWAY if "gateway" in args.parts else ():
            for t in chosen:
                cells.append(
                    {
                        "part": "gateway",
                        "target": t.name,
                        "concurrency": concurrency,
                        **gateway_cell(t, concurrency, args.gateway_duration),
                    }
                )
                say(f"gateway c={concurrency} {t.name}: {cells[-1]['token_ms']}")
    finally:
        for t in chosen:
            t.stop()
        upstream.stop()
    return {"cells": cells, "versions": {t.name: t.version() for t in chosen}}


# --- the tables --------------------------------------------------------------------------------


def _med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def _f(v: float | None, fmt: str = "{:.2f}") -> str:
    return "" if v is None else fmt.format(v)


def _get(cell: object, *path: str) -> float | None:
    for key in path:
        cell = cell.get(key) if isinstance(cell, dict) else None
    return cell if isinstance(cell, (int, float)) else None


def markdown(result: dict[str, Any], names: list[str]) -> str:
    cells = result["cells"]
    out: list[str] = []

    def of(part: str, name: str, **match: object) -> list[dict[str, Any]]:
        return [
            c
            for c in cells
            if c["part"] == part
            and c["target"] == name
            and all(c.get(k) == v for k, v in match.items())
        ]

    one = {n: of("one", n) for n in names}

    def one_fig(name: str, *path: str) -> float | None:
        return _med([_get(c, *path) for c in one[name]])

    def per_token(name: str) -> float | None:
        short, long_ = (
            one_fig(name, SHORT, "total_ms", "p50"),
            one_fig(name, LONG, "total_ms", "p50"),
        )
        if short is None or long_ is None:
            return None
        return 1000 * (long_ - short) / 200  # us per chunk

    out.append("### One client (sequential requests on one connection)\n")
    out.append(
        "| answer | target | total p50 ms | total p99 ms | first byte p50 ms"
        " | first byte p99 ms | added p50 ms | CPU ms / request | x floor | errors |"
    )
    out.append("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|")
    for answer, *_ in ANSWERS:
        direct = one_fig("direct", answer, "total_ms", "p50")
        floor_cpu = one_fig(FLOOR, answer, "cpu_ms") if FLOOR in one else None
        for n in names:
            total = one_fig(n, answer, "total_ms", "p50")
            cpu = one_fig(n, answer, "cpu_ms")
            errors = sum(int(_get(c, answer, "errors") or 0) for c in one[n])
            out.append(
                "| "
                + " | ".join(
                    [
                        answer,
                        n,
                        _f(total),
                        _f(one_fig(n, answer, "total_ms", "p99")),
                        _f(one_fig(n, answer, "ttfb_ms", "p50")),
                        _f(one_fig(n, answer, "ttfb_ms", "p99")),
                        ""
                        if n == "direct" or total is None or direct is None
                        else f"{total - direct:+.2f}",
                        _f(cpu, "{:.3f}"),
                        _f(cpu / floor_cpu if cpu is not None and floor_cpu else None),
                        str(errors),
                    ]
                )
                + " |"
            )
    direct_tok = per_token("direct")
    out.append(
        "\nPer token (the p50 of a 250-chunk tool-call stream less a 50-chunk one's, per"
        " chunk, at 0 ms):\n"
    )
    out.append("| target | us / token | added over direct us / token |")
    out.append("|---|--:|--:|")
    for n in names:
        tok = per_token(n)
        added = None if tok is None or direct_tok is None or n == "direct" else tok - direct_tok
        out.append(f"| {n} | {_f(tok, '{:.1f}')} | {_f(added, '{:+.1f}')} |")

    out.append(
        "\n### A burst (streams started at one instant, new connections; tool call, 50"
        " chunks at 20 ms)\n"
    )
    out.append(
        "| streams | target | first byte p50 ms | first byte p99 ms | in the handler p50 ms"
        " | in the handler p99 ms | failed |"
    )
    out.append("|--:|---|--:|--:|--:|--:|--:|")
    for streams in BURSTS:
        for n in names:
            b = of("burst", n, streams=streams)
            if not b:
                continue
            out.append(
                f"| {streams} | {n} | {_f(_med([_get(c, 'ttfb_ms', 'p50') for c in b]))} |"
                f" {_f(_med([_get(c, 'ttfb_ms', 'p99') for c in b]))} |"
                f" {_f(_med([_get(c, 'handler_ttfb_ms', 'p50') for c in b]))} |"
                f" {_f(_med([_get(c, 'handler_ttfb_ms', 'p99') for c in b]))} |"
                f" {sum(int(c['failed']) for c in b)} |"
            )

    out.append(
        "\n### The gateway shape (concurrency C, streams back to back; tool call, 50"
        " chunks at 20 ms)\n"
    )
    out.append(
        "| C | target | chunks/s | % direct | token p50 ms | token p99 ms | added p50 ms"
        " | added p99 ms | first byte p50 ms | target CPU share | client CPU share | errors |"
    )
    out.append("|--:|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for c in GATEWAY:
        base = next(iter(of("gateway", "direct", concurrency=c)), None)
        for n in names:
            g = next(iter(of("gateway", n, concurrency=c)), None)
            if g is None:
                continue
            rate, brate = g.get("chunks_per_s"), base.get("chunks_per_s") if base else None
            p50, p99 = _get(g, "token_ms", "p50"), _get(g, "token_ms", "p99")
            b50 = _get(base, "token_ms", "p50") if base else None
            b99 = _get(base, "token_ms", "p99") if base else None
            out.append(
                "| "
                + " | ".join(
                    [
                        str(c),
                        n,
                        _f(rate, "{:.0f}"),
                        _f(100 * rate / brate if rate and brate else None, "{:.1f}"),
                        _f(p50),
                        _f(p99),
                        "" if n == "direct" or p50 is None or b50 is None else f"{p50 - b50:+.2f}",
                        "" if n == "direct" or p99 is None or b99 is None else f"{p99 - b99:+.2f}",
                        _f(_get(g, "ttfb_ms", "p50")),
                        _f(g.get("target_cpu_share")),
                        _f(g.get("client_cpu_share")),
                        str(g.get("errors")),
                    ]
                )
                + " |"
            )
    saturated = [
        c["concurrency"]
        for c in cells
        if c["part"] == "gateway"
        and c["target"] == "direct"
        and (c.get("client_cpu_share") or 0) >= 0.9
    ]
    if saturated:
        out.append(
            f"\nThe load generator used a whole core from C = {min(saturated)} on (direct): past it"
            " the figures measure the client as much as the target."
        )
    return "\n".join(out) + "\n"


def _targets(spec: str, install: bool) -> list[targets.Target]:
    chosen: list[targets.Target] = [targets.Direct()]
    for name in filter(None, spec.split(",")):
        if name == "bare":
            chosen.append(targets.Bare())
        elif name == "nginx":
            binary = targets.nginx_binary(install=install)
            if binary is None or not os.path.exists(binary):
                print("nginx: not installed, skipped (--install fetches it)", file=sys.stderr)
                continue
            chosen.append(targets.Nginx(binary))
        elif name == "proxy":
            chosen.append(targets.Proxy())
        elif name.startswith("proxy@"):
            root = Path(name.removeprefix("proxy@")).resolve()
            if not (root / "proxy" / "cli.py").is_file():
                raise SystemExit(f"{name}: no proxy/cli.py under {root}")
            chosen.append(targets.Proxy(root))
        elif name != "direct":
            raise SystemExit(f"unknown target {name!r}; known: bare, nginx, proxy, proxy@DIR")
    return chosen


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["client"]:
        _client_main(argv[1:])
        return 0
    p = argparse.ArgumentParser(
        prog="python -m bench.request_cost",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--quick", action="store_true", help="150 requests, 1 repetition, 3 s gateway loads"
    )
    p.add_argument(
        "--targets",
        default="bare,nginx,proxy",
        help="besides direct: bare, nginx, proxy, proxy@DIR",
    )
    p.add_argument("--reps", type=int, help="repetitions (default 3; quick 1)")
    p.add_argument(
        "--requests", type=int, help="one-client requests per answer (default 300; quick 150)"
    )
    p.add_argument("--warmup", type=int, default=30, help="one-client requests not counted")
    p.add_argument(
        "--gateway-duration", type=float, help="seconds per gateway load (default 5; quick 3)"
    )
    p.add_argument("--parts", default="one,burst,gateway", help="of one, burst, gateway")
    p.add_argument("--install", action="store_true", help="apt-get install nginx when missing")
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    args = p.parse_args(argv)
    args.reps = args.reps or (1 if args.quick else 3)
    args.requests = args.requests or (150 if args.quick else 300)
    args.gateway_duration = args.gateway_duration or (3.0 if args.quick else 5.0)
    _raise_fd_limit()
    chosen = _targets(args.targets, args.install)
    stem = args.out / (time.strftime("%Y%m%d-%H%M%S") + "-request-cost")
    workdir = Path(f"{stem}-logs")
    workdir.mkdir(parents=True)
    load_before = os.getloadavg()[0]
    result = run(args, chosen, workdir, lambda line: print(line, file=sys.stderr, flush=True))
    result["loadavg"] = [load_before, os.getloadavg()[0]]
    versions = ", ".join(f"{k} {v}" for k, v in result["versions"].items() if v)
    table = markdown(result, [t.name for t in chosen])
    table += (
        f"\n{os.cpu_count()} CPUs, Python {sys.version.split()[0]}; {versions}; load average"
        f" {load_before:.2f} before, {result['loadavg'][1]:.2f} after; medians of {args.reps}"
        f" repetitions, {args.requests} requests an answer at one client.\n"
    )
    stem.with_suffix(".json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    stem.with_suffix(".md").write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
