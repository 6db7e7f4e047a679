"""``python -m bench.stream_setup --checkout REV``: what one short chat stream costs the core
whole, in microseconds per stream: the normalizer's construction, the feed of a 3-event
stream (role, content, finish, then ``[DONE]``) one event a read, and its close (issue 29: a
1-chunk stream's set-up was a third of what the proxy adds over a bare aiohttp proxy).

The per-event bench (bench/core.py) divides a stream's cost over 100 chunks, where the
set-up hardly shows; this one is the set-up's own figure. Each round runs this tree and the
checkout in turn (the order alternating), each in a fresh process of its own, and times
``--streams`` streams; the figure is the median of the rounds, per request shape (no tools,
and tools offered).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = r"""
import sys, time, json
sys.path.insert(0, sys.argv[1])
from proxy.core.markup import check_names
from proxy.core.options import UpstreamOptions
from proxy.core.protocols.chat.normalize import RequestInfo, StreamNormalizer
from proxy.core.protocols.chat.sse_stream import ChatSSEStream
from proxy.shell.random_ids import new_id_factory

def chunk(delta, finish=None):
    body = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"

reads = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Hello there."}),
         chunk({}, "stop"), b"data: [DONE]\n\n"]
tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
options = UpstreamOptions(dialects=check_names(["auto"]))
streams = int(sys.argv[2])
out = {}
for shape, body in (("no tools", {}), ("tools", {"tools": tools})):
    request = RequestInfo.from_body(body)
    def run():
        for _ in range(streams):
            rewriter = ChatSSEStream(StreamNormalizer(options, request, new_id=new_id_factory()))
            for read in reads:
                rewriter.feed(read)
            rewriter.close(complete=True)
    run()
    best = min(
        (lambda t0: (run(), time.process_time() - t0)[1])(time.process_time()) for _ in range(5)
    )
    out[shape] = best / streams * 1e6
print(json.dumps(out))
"""


def _measure(root: Path, streams: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(streams)],
        check=True,
        capture_output=True,
        text=True,
    )
    result: dict[str, float] = __import__("json").loads(done.stdout)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", required=True, help="the commit to pair this tree with")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--streams", type=int, default=2000)
    args = parser.parse_args(argv)
    here = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp)
        subprocess.run(
            f"git -C {here} archive {args.checkout} proxy | tar -x -C {before}",
            shell=True,
            check=True,
        )
        runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
        for i in range(args.rounds):
            order = [("before", before), ("after", here)]
            for name, root in order if i % 2 == 0 else order[::-1]:
                runs[name].append(_measure(root, args.streams))
    print(f"| shape | {args.checkout} us/stream | this tree | after/before |")
    print("| --- | --: | --: | --: |")
    for shape in runs["after"][0]:
        b = statistics.median(r[shape] for r in runs["before"])
        a = statistics.median(r[shape] for r in runs["after"])
        ratios = [x[shape] / y[shape] for x, y in zip(runs["after"], runs["before"], strict=True)]
        print(f"| {shape} | {b:.1f} | {a:.1f} | {statistics.median(ratios):.3f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
