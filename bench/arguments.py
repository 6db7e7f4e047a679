"""``python -m bench.arguments`` (and the first table of ``python -m bench``): what issue 25's
argument rules cost a stream.

Each row is a pair measured in one run, interleaved, on the core alone (bench/core.py's
per-event figure: the stream fed to ChatSSEStream as the pump feeds it, one event a read):

* ``manycalls`` (every event ends a call: the check runs once per call) and ``toolcall`` (one
  call of 100 deltas: once per 100 events), with the request's tools, against the same stream
  with the rules taken away (``call_rules`` returning None, as for a request without tools);
* ``content`` and ``plain``, streams without calls (``plain``'s request has no tools), the same
  pair: nothing is parsed or built for them, so the ratio is 1 within the noise.

Then the check alone per call (``CallRules.check`` on the agents' tools, cached and first), and
what holding costs in time to the first argument byte: under ``heal_arguments`` a call's
arguments go out whole at its end, so the first argument byte waits for the whole call
(counted in upstream events, and at a server's pace of 20 ms a token).
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from bench.core import best, cut, stream
from bench.shapes import NO_TOOLS, TOOLS

ROOT = Path(__file__).resolve().parents[1]
AGENT_TOOLS = ROOT / "tests" / "fixtures" / "agent-tools"
PACE_MS = 20  # a server's time per token, for the first-byte figure
SHAPES = ("manycalls", "toolcall", "content", "plain")


def _runner(shape: str, *, rules: bool, chunks: int) -> tuple[Callable[[], None], int]:
    from proxy.core.markup import check_names
    from proxy.core.options import RequestInfo, UpstreamOptions
    from proxy.core.protocols.chat import normalize
    from proxy.core.protocols.chat.sse_stream import ChatSSEStream
    from proxy.shell.random_ids import new_id_factory

    events = stream(shape, chunks)
    reads = cut(events, 1)
    options = UpstreamOptions(dialects=check_names(["auto"]))
    request = RequestInfo.from_body({} if shape in NO_TOOLS else {"tools": TOOLS})
    # the rules taken away as for a request without tools: the module's name for the builder
    # answers None for the "off" runs (the stream is otherwise the same)
    names = vars(normalize)
    real = names["call_rules"]

    def run() -> None:
        if not rules:
            names["call_rules"] = lambda *_: None
        try:
            rewriter = ChatSSEStream(
                normalize.StreamNormalizer(options, request, new_id=new_id_factory())
            )
            for read in reads:
                rewriter.feed(read)
            rewriter.close(complete=True)
        finally:
            names["call_rules"] = real

    return run, len(events)


def _times(run: Callable[[], None], count: int) -> Callable[[], None]:
    def runs() -> None:
        for _ in range(count):
            run()

    return runs


def stream_rows(repeat: int, streams: int, chunks: int = 100) -> list[dict[str, Any]]:
    rows = []
    for shape in SHAPES:
        on, events = _runner(shape, rules=True, chunks=chunks)
        off, _ = _runner(shape, rules=False, chunks=chunks)
        figures = {"on": [], "off": []}  # type: dict[str, list[float]]
        on(), off()  # warm: the imports, the schema compiled once per process
        for _ in range(repeat):  # interleaved: the machine's drift falls on both alike
            for key, run in (("on", on), ("off", off)):
                figures[key].append(best(_times(run, streams), 1, time.process_time))
        per_event = {k: min(v) / (streams * events) * 1e6 for k, v in figures.items()}
        calls = chunks if shape == "manycalls" else (1 if shape == "toolcall" else 0)
        rows.append(
            {
                "shape": shape,
                "events": events,
                "calls": calls,
                "on_us": per_event["on"],
                "off_us": per_event["off"],
                "ratio": per_event["on"] / per_event["off"],
            }
        )
    return rows


def check_rows(number: int) -> list[dict[str, Any]]:
    from proxy.core.arguments.rules import CallRules
    from proxy.core.arguments.schemas import SchemaCache
    from proxy.core.arguments.tools import RequestTools

    rows = []
    for path in sorted(AGENT_TOOLS.glob("*.json")):
        tools = orjson.loads(path.read_bytes())
        if not isinstance(tools, list) or not tools:
            continue
        function = tools[0]["function"]
        name = function["name"]
        text = orjson.dumps(_fitting(function.get("parameters"))).decode()
        counts: Counter[str] = Counter()
        first = time.perf_counter()
        rules = CallRules(RequestTools.from_chat(tools, SchemaCache()))
        rules.check(name, text, counts)
        first = time.perf_counter() - first
        start = time.perf_counter()
        for _ in range(number):
            rules.check(name, text, counts)
        cached = (time.perf_counter() - start) / number
        rows.append(
            {"tools": path.stem, "tool": name, "first_us": first * 1e6, "cached_us": cached * 1e6}
        )
    return rows


_PLAIN = {"string": "x", "integer": 1, "number": 1.5, "boolean": True, "array": [], "null": None}


def _fitting(schema: Any) -> Any:
    """Arguments with every required property of a plain value of its type (the fitting
    call an agent mostly sends)."""
    if not isinstance(schema, dict):
        return {}
    kind = schema.get("type", "object")
    kind = kind[0] if isinstance(kind, list) else kind
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties", {})
        return {k: _fitting(props.get(k)) for k in schema.get("required", ())}
    return _PLAIN.get(kind, "x")


def _bench_tool_check_us(number: int) -> float:
    from proxy.core.arguments.rules import CallRules
    from proxy.core.arguments.schemas import SchemaCache
    from proxy.core.arguments.tools import RequestTools

    rules = CallRules(RequestTools.from_chat(TOOLS, SchemaCache()))
    counts: Counter[str] = Counter()
    text = '{"q": " T0000000000000001"}'
    rules.check("get_weather", text, counts)
    start = time.process_time()
    for _ in range(number):
        rules.check("get_weather", text, counts)
    return (time.process_time() - start) / number * 1e6


def first_byte_rows(chunks: int = 100) -> list[dict[str, Any]]:
    """The upstream event after which the client has its first argument byte, streamed and
    held (heal_arguments)."""
    from proxy.core.options import RequestInfo, UpstreamOptions
    from proxy.core.protocols.chat.normalize import StreamNormalizer
    from proxy.core.protocols.chat.sse_stream import ChatSSEStream
    from proxy.shell.random_ids import new_id_factory

    events = stream("toolcall", chunks)
    request = RequestInfo.from_body({"tools": TOOLS})
    rows = []
    for label, options in (
        ("streamed", UpstreamOptions()),
        ("heal_arguments", UpstreamOptions(heal_arguments=True)),
    ):
        rewriter = ChatSSEStream(StreamNormalizer(options, request, new_id=new_id_factory()))
        at = None
        for i, event in enumerate(events):
            out = b"".join(rewriter.feed(event))
            if at is None and b'"arguments":"{' in out:
                at = i
        rows.append({"form": label, "event": at, "of": len(events)})
    return rows


def markdown(repeat: int = 5, streams: int = 20, number: int = 20_000) -> str:
    lines = [
        "## Arguments against the tools' schemas (issue 25)",
        "",
        "Per upstream event, the rules on / off, paired in one run (CPU time, best of "
        f"{repeat}, {streams} streams of 100 chunks, one event a read):",
        "",
        "| shape | calls | on, us/event | off, us/event | ratio | the check, us/event |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    per_call = _bench_tool_check_us(number)
    for row in stream_rows(repeat, streams):
        # the check's own cost (timed alone) spread over the stream's events
        share = per_call * row["calls"] / row["events"]
        lines.append(
            f"| {row['shape']} | {row['calls']} | {row['on_us']:.2f} | {row['off_us']:.2f} |"
            f" {row['ratio']:.2f} | {share:.3f} |"
        )
    lines += [
        "",
        f"The check of the bench's call alone: {per_call:.2f} us a call (cached schema).",
    ]
    lines += [
        "",
        "The check alone, one call of an agent's first tool (its schema compiled on the first):",
        "",
        "| tools | tool | first call, us | cached, us |",
        "| --- | --- | --- | --- |",
    ]
    for row in check_rows(number):
        lines.append(
            f"| {row['tools']} | {row['tool']} | {row['first_us']:.0f} | {row['cached_us']:.2f} |"
        )
    lines += [
        "",
        "Time to the first argument byte (a call of 100 argument deltas):",
        "",
        "| form | after upstream event | at 20 ms a token |",
        "| --- | --- | --- |",
    ]
    rows = first_byte_rows()
    base = rows[0]["event"]
    for row in rows:
        delay = (row["event"] - base) * PACE_MS
        lines.append(f"| {row['form']} | {row['event']} of {row['of']} | +{delay} ms |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.arguments", description=__doc__)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--streams", type=int, default=20)
    args = p.parse_args(argv)
    print(markdown(args.repeat, args.streams))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
