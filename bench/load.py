"""Load generator: C concurrent streams, back to back, for a bounded time and request count.

``python -m bench.load --url U --model M --concurrency C --duration S [--protocol P]`` prints
one JSON line; P (chat, responses or messages, bench/protocols.py) is what it speaks.
It parses no JSON on the hot path: stamps are found in the raw bytes of each read, so the
client costs the same whatever proxy is in front, and the time of a read is the arrival
time of every stamp in it. Streams still open at the deadline are cancelled, which is not
an error; their chunks that arrived in time count. Streams start spread over a ramp (the
first fifth of the time) so the first bytes are not one burst of C
connections, and chunks/s counts only what arrives after the ramp.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field

import aiohttp
import orjson

from bench import protocols, serve
from bench.shapes import NO_TOOLS, parse_model
from bench.stamps import now_us

API_KEY = "sk-bench-0123456789abcdef0123456789abcdef"  # a key LiteLLM accepts as a master key
_HEADERS = {"Content-Type": "application/json", "Authorization": f"Bearer {API_KEY}"}
# What an Anthropic SDK sends besides; a Bearer-only proxy ignores them.
_MESSAGES_HEADERS = {**_HEADERS, "x-api-key": API_KEY, "anthropic-version": "2023-06-01"}


@dataclass
class Tally:
    ttfb_us: list[int] = field(default_factory=list)
    latency_us: list[int] = field(default_factory=list)
    chunks: int = 0
    steady_from: int = 0  # chunks arriving before this time (us) are not counted in chunks/s
    steady_chunks: int = 0
    started: int = 0
    completed: int = 0
    errors: Counter[str] = field(default_factory=Counter)


def percentile(values: list[int], q: float) -> float | None:
    """Nearest-rank percentile of unsorted values (None when there are none)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


async def _stream(
    session: aiohttp.ClientSession, url: str, body: bytes, expect: int, t: Tally, protocol: str
) -> None:
    t0 = now_us()
    headers = _MESSAGES_HEADERS if protocol == "messages" else _HEADERS
    async with session.post(url, data=body, headers=headers) as resp:
        if resp.status != 200:
            t.errors[f"status {resp.status}"] += 1
            await resp.read()
            return
        reader = protocols.reader(protocol)
        first = True
        async for data in resp.content.iter_any():
            arrival = now_us()
            if first:
                t.ttfb_us.append(arrival - t0)
                first = False
            stamps = reader.feed(data)
            t.latency_us.extend(arrival - s for s in stamps)
            t.chunks += len(stamps)
            if arrival >= t.steady_from:
                t.steady_chunks += len(stamps)
    if error := reader.error(expect):
        t.errors[error] += 1
    else:
        t.completed += 1


async def _worker(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    expect: int,
    deadline: int,
    max_requests: int,
    delay: float,
    t: Tally,
    protocol: str,
) -> None:
    await asyncio.sleep(delay)
    while t.started < max_requests and now_us() < deadline:
        t.started += 1
        try:
            await _stream(session, url, body, expect, t, protocol)
        except (TimeoutError, aiohttp.ClientError, OSError) as e:
            t.errors[type(e).__name__] += 1
            await asyncio.sleep(0.01)  # a refused connection must not turn into a busy loop


def client_session() -> aiohttp.ClientSession:
    """A load's session: as many connections as it has clients, no deadline but connecting's."""
    connector = aiohttp.TCPConnector(limit=0)
    return aiohttp.ClientSession(
        connector=connector, timeout=aiohttp.ClientTimeout(total=None, sock_connect=10)
    )


async def run_load(
    url: str,
    model: str,
    concurrency: int,
    duration: float,
    max_requests: int,
    protocol: str = "chat",
) -> dict[str, object]:
    req = parse_model(model)
    expect = req.chunks if req else -1
    tools = req is None or req.shape not in NO_TOOLS
    body = orjson.dumps(protocols.request(protocol, model, tools))
    t = Tally()
    async with client_session() as session:
        start = now_us()
        deadline = start + int(duration * 1e6)
        ramp = duration / 5
        t.steady_from = start + int(ramp * 1e6)
        tasks = [
            asyncio.create_task(
                _worker(
                    session,
                    url,
                    body,
                    expect,
                    deadline,
                    max_requests,
                    i * ramp / concurrency,
                    t,
                    protocol,
                )
            )
            for i in range(concurrency)
        ]
        _, pending = await asyncio.wait(tasks, timeout=duration)
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        elapsed = (min(now_us(), deadline) - start) / 1e6
    steady = elapsed - ramp
    return {
        "concurrency": concurrency,
        "duration_s": elapsed,
        "started": t.started,
        "completed": t.completed,
        "chunks": t.chunks,
        # A load that ran out of requests before its ramp ended has no steady part.
        "chunks_per_s": t.steady_chunks / steady if steady > 0 else t.chunks / max(elapsed, 1e-9),
        "ttfb_ms": {q: _ms(percentile(t.ttfb_us, float(q[1:]))) for q in ("p50", "p99")},
        "latency_ms": {q: _ms(percentile(t.latency_us, float(q[1:]))) for q in ("p50", "p99")},
        "errors": dict(t.errors),
    }


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True, help="full URL of the protocol's endpoint")
    parser.add_argument("--model", required=True)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--duration", type=float, default=5.0, help="seconds")
    parser.add_argument("--max-requests", type=int, default=1_000_000)
    parser.add_argument("--protocol", choices=protocols.CLIENT_PROTOCOLS, default="chat")
    args = parser.parse_args()

    async def go() -> None:
        result = await run_load(
            args.url, args.model, args.concurrency, args.duration, args.max_requests, args.protocol
        )
        sys.stdout.buffer.write(orjson.dumps(result) + b"\n")

    serve.run(go())


if __name__ == "__main__":
    main()
