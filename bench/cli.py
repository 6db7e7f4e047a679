"""``python -m bench``: measure direct, this proxy, nginx, a bare aiohttp proxy and LiteLLM.

Writes bench/results/<time>.json (every measurement), <time>.md (the table) and <time>-logs/
(the servers' configs and logs), and prints the table.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import orjson

from bench import (
    arguments,
    bridge_report,
    gcwatch,
    per_request,
    profile,
    protocols,
    report,
    runner,
    targets,
)
from bench.runner import Load, Plan
from bench.shapes import SHAPES

ALL_LOADS = "1x0,10x0,100x0,1x20,10x20,100x20"
QUICK_LOADS = "10x0,100x20"
TARGETS = ("direct", "proxy", "nginx", "bare", "litellm")
MORE_TARGETS = (
    "proxy@DIR (the proxy of another checkout)",
    "proxy-wN (the proxy with --workers N)",
    "bare-asyncio",
    "proxy+gc, proxy+freeze, proxy+thresholdN (the garbage collector's pauses, bench.gcwatch)",
)


def _loads(spec: str) -> list[Load]:
    out = []
    for item in filter(None, spec.split(",")):
        conc, delay = item.split("x")
        out.append(Load(int(conc), int(delay)))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"loads {QUICK_LOADS}, 1 repetition, 2 s, no idle streams, chat only",
    )
    p.add_argument("--reps", type=int, help="repetitions of each measurement (default 3; quick 1)")
    p.add_argument("--duration", type=float, help="seconds per measurement (default 5; quick 2)")
    p.add_argument(
        "--loads", help=f"streams x ms between chunks, comma-separated (default {ALL_LOADS})"
    )
    p.add_argument(
        "--idle",
        default="1000x1000",
        help="idle-streams load, streams x ms ('' for none; quick: none)",
    )
    p.add_argument("--idle-duration", type=float, default=10.0, help="seconds for the idle load")
    p.add_argument(
        "--shapes",
        default="content,toolcall,hermes",
        help=f"stream shapes to send, of {', '.join(SHAPES)}",
    )
    p.add_argument(
        "--protocols",
        help="what the clients speak, of chat, responses, messages (default: all; quick: chat)",
    )
    p.add_argument(
        "--modes",
        default="translate,native",
        help="how responses and messages are served: translate (the proxy's bridge over the"
        " chat upstream), native (the upstream's own stream)",
    )
    p.add_argument("--chunks", type=int, default=100, help="payload chunks per stream")
    p.add_argument(
        "--max-requests", type=int, default=1_000_000, help="end a load after this many streams"
    )
    p.add_argument(
        "--targets", default=",".join(TARGETS), help="what to measure ('direct' always is)"
    )
    p.add_argument("--litellm", help="LiteLLM proxy command (default: found on PATH or importable)")
    p.add_argument(
        "--no-install", action="store_true", help="do not apt-get install nginx when missing"
    )
    p.add_argument(
        "--warmup", type=float, default=0.5, help="seconds of load per shape before measuring"
    )
    p.add_argument(
        "--profile", metavar="TARGET", help="sample this target (its table name) with py-spy"
    )
    p.add_argument(
        "--per-request",
        type=int,
        nargs="?",
        const=16,
        default=0,
        metavar="CLIENTS",
        help="also measure per-request cost: CLIENTS (16) clients, 1-chunk answers",
    )
    p.add_argument("--out", type=Path, default=Path(__file__).parent / "results")
    return p


def _targets(names: list[str], args: argparse.Namespace) -> list[targets.Target]:
    chosen: list[targets.Target] = [targets.Direct()]
    for name in names:
        if name == "proxy":
            if importlib.util.find_spec("proxy.cli") is None:
                print("toolcall-proxy: proxy/cli.py not found, skipped", file=sys.stderr)
                continue
            chosen.append(targets.Proxy())
        elif name.startswith("proxy-w") and name.removeprefix("proxy-w").isdigit():
            chosen.append(targets.Proxy(workers=int(name.removeprefix("proxy-w"))))
        elif name.startswith("proxy@"):
            root = Path(name.removeprefix("proxy@")).resolve()
            if not (root / "proxy" / "cli.py").is_file():
                raise SystemExit(f"{name}: no proxy/cli.py under {root}")
            chosen.append(targets.Proxy(root))
        elif name.startswith("proxy+"):
            chosen.append(gcwatch.WatchedProxy(name.removeprefix("proxy+")))
        elif name == "nginx":
            binary = targets.nginx_binary(install=not args.no_install)
            if binary is None:
                print("nginx: not installed, skipped", file=sys.stderr)
                continue
            chosen.append(targets.Nginx(binary))
        elif name in ("bare", "bare-asyncio"):
            chosen.append(targets.Bare("asyncio" if name == "bare-asyncio" else "uvloop"))
        elif name == "litellm":
            command = targets.litellm_command(args.litellm)
            if command is None:
                print("litellm: not installed, skipped", file=sys.stderr)
                continue
            chosen.append(targets.LiteLLM(command))
        elif name != "direct":
            raise SystemExit(f"unknown target {name!r}; known: {', '.join(TARGETS + MORE_TARGETS)}")
    return chosen


def _names(spec: str) -> list[str]:
    return [name for name in spec.split(",") if name]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    default = QUICK_LOADS if args.quick else ALL_LOADS
    loads = _loads(default if args.loads is None else args.loads)
    if args.idle and not args.quick:
        conc, delay = args.idle.split("x")
        loads.append(Load(int(conc), int(delay), fresh=True))
    shapes = [s for s in args.shapes.split(",") if s]
    if unknown := set(shapes) - set(SHAPES):
        raise SystemExit(f"unknown shapes {sorted(unknown)}; known: {', '.join(SHAPES)}")
    spec = args.protocols or ("chat" if args.quick else ",".join(protocols.CLIENT_PROTOCOLS))
    try:
        streams = protocols.streams(_names(spec), _names(args.modes))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    plan = Plan(
        shapes=shapes,
        loads=loads,
        reps=args.reps or (1 if args.quick else 3),
        duration=args.duration or (2.0 if args.quick else 5.0),
        idle_duration=args.idle_duration,
        chunks=args.chunks,
        max_requests=args.max_requests,
        warmup=args.warmup,
        protocols=streams,
        per_request_clients=args.per_request,
    )
    chosen = _targets([t for t in args.targets.split(",") if t], args)
    if any(s.endswith("/native") for s in streams):  # each proxy again, in native mode
        chosen += [t.native_twin() for t in chosen if isinstance(t, targets.Proxy)]
    stem = args.out / time.strftime("%Y%m%d-%H%M%S")
    args.out.mkdir(parents=True, exist_ok=True)
    if args.profile:
        if profile.py_spy() is None:
            raise SystemExit("--profile needs py-spy: pip install -e '.[bench]'")
        plan.profile = args.profile
        plan.profile_dir = str(stem) + "-profile"
        Path(plan.profile_dir).mkdir()
    workdir = Path(f"{stem}-logs")  # servers' configs and logs, kept for a look afterwards
    workdir.mkdir()
    result = runner.run(plan, chosen, workdir, progress=lambda line: print(line, file=sys.stderr))
    table = report.markdown(result) + "\n" + report.machine_line(result) + "\n"
    if checks := report.verdicts(report.summarize(result["cells"])):
        table += "\nTargets (issue #6):\n\n" + "\n".join(checks) + "\n"
    if bridges := bridge_report.translate_table(report.summarize(result["cells"])):
        table += "\nTranslating, CPU against the chat rewrite (issue #18):\n\n" + bridges + "\n"
    if workers := report.workers_table(report.summarize(result["cells"])):
        table += "\n" + workers
    if "per_request" in result:
        rows = per_request.summarize(result["per_request"])
        table += "\n" + per_request.markdown(rows, args.per_request)
        if checks := per_request.verdicts(rows):
            table += "\nTargets (issue #18):\n\n" + "\n".join(checks) + "\n"
        result["per_request_summary"] = rows
    # issue 25: the argument rules' cost on the core alone, paired on/off in this run
    table += "\n" + arguments.markdown(repeat=3 if args.quick else 7)
    if gc_logs := [t.gc_log for t in chosen if isinstance(t, gcwatch.WatchedProxy) and t.gc_log]:
        summaries = [gcwatch.summary(log) for log in gc_logs if log.is_file()]
        table += "\nGarbage collections over the run:\n\n```\n" + "\n".join(summaries) + "\n```\n"
    result["summary"] = report.summarize(result["cells"])
    stem.with_suffix(".json").write_bytes(orjson.dumps(result, option=orjson.OPT_INDENT_2))
    stem.with_suffix(".md").write_text(table)
    print(table)
    print(f"results: {stem}.json, {stem}.md", file=sys.stderr)
    return 0
