"""Turn raw measurements into figures (medians over repetitions) and a Markdown table."""

from __future__ import annotations

from collections import Counter, defaultdict
from statistics import median
from typing import Any

Cell = dict[str, Any]
DIRECT = "direct"


def _med(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return median(known) if known else None


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def _figures(cell: Cell, direct: Cell | None) -> dict[str, float | None]:
    lat = cell.get("latency_ms") or {}
    ttfb = cell.get("ttfb_ms") or {}
    base = (direct or {}).get("latency_ms") or {}
    chunks = cell.get("chunks") or 0
    rate = cell.get("chunks_per_s")
    direct_rate = (direct or {}).get("chunks_per_s")
    cpu, before, peak = cell.get("cpu_s"), cell.get("rss_before"), cell.get("rss_peak")
    return {
        "chunks_per_s": rate,
        "pct_direct": 100 * rate / direct_rate if rate is not None and direct_rate else None,
        "ttfb_p50_ms": ttfb.get("p50"),
        "ttfb_p99_ms": ttfb.get("p99"),
        "added_p50_ms": _minus(lat.get("p50"), base.get("p50")),
        "added_p99_ms": _minus(lat.get("p99"), base.get("p99")),
        "cpu_s_per_1k": 1000 * cpu / chunks if cpu is not None and chunks else None,
        "rss_peak_mb": peak / 2**20 if peak is not None else None,
        "rss_per_stream_kb": (peak - before) / 1024 / cell["concurrency"]
        if peak is not None and before is not None
        else None,
    }


def _protocol(cell: Cell) -> str:
    return str(cell.get("protocol", "chat"))  # results from before the protocol dimension


def summarize(cells: list[Cell]) -> list[dict[str, Any]]:
    """One row per (protocol, shape, load, target): the median of each figure over the
    repetitions."""
    direct = {
        (_protocol(c), c["shape"], c["concurrency"], c["delay_ms"], c["rep"]): c
        for c in cells
        if c["target"] == DIRECT
    }
    groups: dict[tuple[str, str, int, int, str], list[Cell]] = defaultdict(list)
    for c in cells:
        groups[(_protocol(c), c["shape"], c["concurrency"], c["delay_ms"], c["target"])].append(c)
    rows = []
    for (protocol, shape, conc, delay, target), reps in groups.items():
        figs = [_figures(c, direct.get((protocol, shape, conc, delay, c["rep"]))) for c in reps]
        errors: Counter[str] = Counter()
        for c in reps:
            errors.update(c.get("errors") or {})
        row: dict[str, Any] = {"shape": shape, "concurrency": conc, "delay_ms": delay}
        row["target"] = target
        row["protocol"] = protocol
        row.update({k: _med([f[k] for f in figs]) for k in figs[0]})
        row["errors"] = dict(errors)
        rows.append(row)
    return rows


_COLUMNS = (
    ("chunks/s", "chunks_per_s", "{:.0f}"),
    ("% direct", "pct_direct", "{:.1f}"),
    ("TTFB p50 ms", "ttfb_p50_ms", "{:.2f}"),
    ("TTFB p99 ms", "ttfb_p99_ms", "{:.2f}"),
    ("added p50 ms", "added_p50_ms", "{:+.2f}"),
    ("added p99 ms", "added_p99_ms", "{:+.2f}"),
    ("CPU s / 1k chunks", "cpu_s_per_1k", "{:.3f}"),
    ("peak RSS MB", "rss_peak_mb", "{:.1f}"),
    ("RSS / stream KB", "rss_per_stream_kb", "{:.1f}"),
)


def _cell(value: float | None, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def markdown(result: dict[str, Any]) -> str:
    rows = summarize(result["cells"])
    plan = result["plan"]
    protocols = plan.get("protocols", ["chat"])
    out = []
    for protocol, shape in ((p, s) for p in protocols for s in plan["shapes"]):
        if not any(r["shape"] == shape and r.get("protocol", "chat") == protocol for r in rows):
            continue  # no stream loads in this run (--loads '' with --per-request)
        out.append(f"#### {shape}\n" if protocols == ["chat"] else f"#### {protocol}: {shape}\n")
        if protocol.endswith("/translate"):
            out.append(f"direct: the chat stream ({protocol} needs a bridge).\n")
        head = ["streams x gap", "target", *(c[0] for c in _COLUMNS), "errors"]
        out.append("| " + " | ".join(head) + " |")
        out.append("|" + "|".join("---" if i < 2 else "--:" for i in range(len(head))) + "|")
        for r in rows:
            if r["shape"] != shape or r["protocol"] != protocol:
                continue
            errors = sum(r["errors"].values())
            target = r["target"]
            if target == DIRECT and protocol.endswith("/translate"):
                target += " (chat stream)"
            line = [f"{r['concurrency']} x {r['delay_ms']} ms", target]
            line += [_cell(r[key], fmt) for _, key, fmt in _COLUMNS]
            line.append(str(errors) if errors else "0")
            out.append("| " + " | ".join(line) + " |")
        out.append("")
    return "\n".join(out)


def machine_line(result: dict[str, Any]) -> str:
    m = result["machine"]
    plan = result["plan"]
    packages = {k: v for k, v in m.get("packages", {}).items() if v}
    versions = ", ".join(f"{k} {v}" for k, v in {**packages, **m.get("versions", {})}.items())
    return (
        f"{m['nproc']} CPUs ({m['cpu']}), Python {m['python']}, Linux {m['kernel']}"
        + (f", {versions}" if versions else "")
        + f"; load average {m['loadavg_before'][0]:.2f} before, {m['loadavg_after'][0]:.2f} after."
        + f" Medians of {plan['reps']} repetitions of {plan['duration']:g} s"
        + f" ({plan['idle_duration']:g} s for idle streams),"
        + f" {plan['chunks']} payload chunks a stream."
    )


PROXY, BARE, NGINX, LITELLM = "toolcall-proxy", "bare aiohttp", "nginx", "litellm"
REWRITTEN = ("toolcall", "hermes")  # shapes the proxy must rewrite; "content" needs nothing


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def verdicts(rows: list[dict[str, Any]]) -> list[str]:
    """The issue's targets, each checked against the figures that exist ("met"/"MISSED")."""
    chat = (r for r in rows if r.get("protocol", "chat") == "chat")
    at = {(r["shape"], r["concurrency"], r["delay_ms"], r["target"]): r for r in chat}
    out: list[str] = []

    def check(ok: bool | None, text: str) -> None:
        if ok is not None:
            out.append(f"- {'met' if ok else 'MISSED'}: {text}")

    for (shape, conc, delay, target), r in sorted(at.items()):
        if target != PROXY:
            continue
        where = f"{shape} {conc} x {delay} ms"
        bare = at.get((shape, conc, delay, BARE), {})
        nginx = at.get((shape, conc, delay, NGINX), {})
        litellm = at.get((shape, conc, delay, LITELLM), {})
        cpu = r["cpu_s_per_1k"]
        if shape not in REWRITTEN and (x := _ratio(cpu, bare.get("cpu_s_per_1k"))) is not None:
            check(x <= 1.1, f"{where}: CPU {x:.2f}x the bare proxy's (at most 1.1x)")
        x = _ratio(cpu, nginx.get("cpu_s_per_1k"))
        if shape in REWRITTEN and conc == 100 and delay == 0 and x is not None:
            check(x <= 6, f"{where}: CPU {x:.1f}x nginx's (at most 6x, aim 3x)")
        if (x := _ratio(litellm.get("cpu_s_per_1k"), cpu)) is not None:
            check(x >= 15, f"{where}: LiteLLM spends {x:.0f}x our CPU (at least 15x)")
        if (ttfb := r["ttfb_p50_ms"]) is not None and bare.get("ttfb_p50_ms") is not None:
            d = ttfb - bare["ttfb_p50_ms"]
            check(d <= 1, f"{where}: TTFB p50 {d:+.2f} ms against the bare proxy's (within 1 ms)")
        if conc == 100 and delay == 20:
            if (pct := r["pct_direct"]) is not None:
                check(pct >= 99, f"{where}: {pct:.1f}% of the direct throughput (at least 99%)")
            if (p50 := r["added_p50_ms"]) is not None:
                check(p50 < 0.2, f"{where}: added latency p50 {p50:+.2f} ms (under 0.2 ms)")
            if (p99 := r["added_p99_ms"]) is not None and bare.get("added_p99_ms") is not None:
                check(
                    p99 <= bare["added_p99_ms"],
                    f"{where}: added p99 {p99:+.2f} ms, bare {bare['added_p99_ms']:+.2f} ms"
                    " (no worse)",
                )
        if conc >= 1000:
            errors = sum(r["errors"].values())
            check(errors == 0, f"{where}: {errors} errors (none)")
            if (kb := r["rss_per_stream_kb"]) is not None:
                check(kb < 50, f"{where}: RSS grew {kb:.1f} KB per open stream (under 50 KB)")
    return out


def workers_table(rows: list[dict[str, Any]]) -> str:
    """The proxy with one worker against ``proxy-wN`` on unthrottled loads: total chunks/s,
    chunks per proxy CPU-second, and each as a ratio to one worker's ('' without both)."""
    rows = [r for r in rows if r.get("protocol", "chat") == "chat"]
    rows = [r for r in rows if not r["delay_ms"]]
    one = {(r["shape"], r["concurrency"]): r for r in rows if r["target"] == PROXY}
    lines = []
    for r in rows:
        base = one.get((r["shape"], r["concurrency"]))
        if not r["target"].startswith(PROXY + " (") or base is None:
            continue
        for row in (base, r):
            per_cpu = 1000 / row["cpu_s_per_1k"] if row["cpu_s_per_1k"] else None
            rate = _ratio(row["chunks_per_s"], base["chunks_per_s"])
            cpu = _ratio(per_cpu, 1000 / base["cpu_s_per_1k"] if base["cpu_s_per_1k"] else None)
            cells = [f"{r['shape']} {r['concurrency']} x 0 ms", row["target"]]
            cells += [_cell(row["chunks_per_s"], "{:.0f}"), _cell(rate, "{:.2f}x")]
            cells += [_cell(per_cpu, "{:.0f}"), _cell(cpu, "{:.2f}x")]
            lines.append("| " + " | ".join(cells) + " |")
    if not lines:
        return ""
    head = "| load | target | chunks/s | vs 1 worker | chunks / proxy CPU s | vs 1 worker |"
    return (
        "#### Workers (unthrottled)\n\n"
        + head
        + "\n|---|---|--:|--:|--:|--:|\n"
        + "\n".join(lines)
        + "\n"
    )
