"""What a bridge costs: the proxy's CPU per 1,000 chunks when it serves a Responses or
Messages client over the chat upstream, against its CPU for the chat rewrite of the very same
upstream stream (issue #18's target: within 1.5x), and LiteLLM's CPU for the same bridge
against the proxy's where LiteLLM was measured.
"""

from __future__ import annotations

from typing import Any, Final

from bench.report import LITELLM, PROXY

LIMIT: Final = 1.5
BRIDGES: Final = ("responses/translate", "messages/translate")


def translate_table(rows: list[dict[str, Any]]) -> str:
    """One line per (proxy, shape, load) measured over chat and at least one bridge; '' when
    there is none."""
    cpu = {
        (r.get("protocol", "chat"), r["target"], r["shape"], r["concurrency"], r["delay_ms"]): r[
            "cpu_s_per_1k"
        ]
        for r in rows
    }
    bridges = [b for b in BRIDGES if any(key[0] == b for key in cpu)]
    peer = any(key[0] in bridges and key[1] == LITELLM for key in cpu)
    where = sorted(
        {key[1:] for key in cpu if key[0] == "chat" and key[1].startswith(PROXY)},
        key=lambda k: (k[0], k[1], k[2], k[3]),
    )
    lines = []
    for target, shape, conc, delay in where:
        chat = cpu[("chat", target, shape, conc, delay)]
        cells = []
        for bridge in bridges:
            figure = cpu.get((bridge, target, shape, conc, delay))
            ratio = figure / chat if figure is not None and chat else None
            cells += [_fmt(figure, "{:.3f}"), _verdict(ratio)]
            if peer:
                theirs = cpu.get((bridge, LITELLM, shape, conc, delay))
                cells.append(_fmt(theirs / figure if theirs and figure else None, "{:.0f}x"))
        if any(cells):
            start = f"| {target} | {shape} | {conc} x {delay} ms | {_fmt(chat, '{:.3f}')} | "
            lines.append(start + " | ".join(cells) + " |")
    if not lines:
        return ""
    names = [b.split("/")[0] for b in bridges]
    head = ["target", "shape", "streams x gap", "chat CPU s / 1k chunks"]
    for name in names:
        head += [f"{name} CPU s / 1k chunks", f"{name} / chat"]
        head += ["LiteLLM's CPU, times ours"] if peer else []
    rule = "|" + "|".join("---" if i < 3 else "--:" for i in range(len(head))) + "|"
    return "\n".join(["| " + " | ".join(head) + " |", rule, *lines])


def _fmt(value: float | None, fmt: str) -> str:
    return "" if value is None else fmt.format(value)


def _verdict(ratio: float | None) -> str:
    if ratio is None:
        return ""
    return f"{ratio:.2f}x" + ("" if ratio <= LIMIT else f" (MISSED: over {LIMIT}x)")
