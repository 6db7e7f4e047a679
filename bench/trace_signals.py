"""What aiohttp's trace signals cost a request when the session has one TraceConfig.

``python -m bench.trace_signals``: in one process, no I/O, the Trace aiohttp builds for each
request of a session with ``trace_configs`` and the five signals an upstream request on a
reused connection sends through it (start, reuse, headers, a body chunk, end; the URL's
``update_query`` of two of them included), 7 x 20,000 times; the CPU microseconds per request,
min and median. Before e5107c8 every proxied request paid this to learn whether its
connection was reused (proxy/shell/keepalive.py now asks its connector).
"""

from __future__ import annotations

import asyncio
import time
from statistics import median
from types import SimpleNamespace

from aiohttp import ClientSession, TraceConfig, TraceConnectionReuseconnParams
from aiohttp.tracing import Trace
from multidict import CIMultiDict
from yarl import URL


async def _on_reuse(
    session: ClientSession, context: SimpleNamespace, params: TraceConnectionReuseconnParams
) -> None:
    return None


async def main() -> None:
    config = TraceConfig()
    config.on_connection_reuseconn.append(_on_reuse)
    config.freeze()
    session = ClientSession()
    url = URL("http://127.0.0.1:8000/v1/chat/completions")
    headers = CIMultiDict({"Content-Type": "application/json"})

    async def one() -> None:
        context = config.trace_config_ctx(trace_request_ctx=SimpleNamespace())
        trace = Trace(session, config, context)
        await trace.send_request_start("POST", url.update_query(None), headers)
        await trace.send_connection_reuseconn()
        await trace.send_request_headers("POST", url, headers)
        await trace.send_request_chunk_sent("POST", url, b"{}")
        await trace.send_request_end("POST", url.update_query(None), headers, None)  # type: ignore[arg-type]

    rounds = []
    for _ in range(7):
        n = 20000
        started = time.process_time()
        for _ in range(n):
            await one()
        rounds.append((time.process_time() - started) / n * 1e6)
    await session.close()
    print(f"trace signals, us per request: min {min(rounds):.1f}, median {median(rounds):.1f}")


if __name__ == "__main__":
    asyncio.run(main())
