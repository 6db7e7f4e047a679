"""One of three replicas killed under load: how many requests were lost, cut and retried.

``python -m bench.replica_failover`` runs the real proxy app in this process in front of
three real aiohttp replicas on 127.0.0.1 (tests/support/replicas.py), keeps ``--streams``
chat streams in flight (each client starts its next as soon as one ends), kills one replica
(every connection aborted, its port closed) ``--kill-at`` seconds in, and keeps the load for
``--seconds`` in all. It prints, for the streams started:

- complete: ended with ``data: [DONE]``;
- cut: in flight on the killed replica when it died, so broken off mid-stream (never
  retried: a byte had reached the client), each seen by its client as an error;
- failed before the first byte: an error status instead of a stream (the goal: none);
- cut but finished cleanly (a cut stream that looked complete: must be none);
- retried: requests the proxy sent again (the access lines' ``attempts``), and the metric.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
from collections import Counter
from time import monotonic
from typing import Any

import aiohttp
from aiohttp import web

from proxy.settings import Settings, UpstreamSettings
from proxy.shell.accesslog import ACCESS_LOGGER
from proxy.shell.app import create_app
from proxy.shell.limits import server_options
from tests.support.replicas import Replica, started

BODY = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "go"}]}


class _Attempts(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.attempts: Counter[int] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "access", None)
        if isinstance(fields, dict):
            self.attempts[fields["attempts"]] += 1


async def _client(
    session: aiohttp.ClientSession, url: str, until: float, tally: Counter[str]
) -> None:
    while monotonic() < until:
        try:
            async with session.post(url, json=BODY) as resp:
                if resp.status != 200:
                    tally["failed before the first byte"] += 1
                    await resp.read()
                    continue
                body = await resp.read()
        except aiohttp.ClientPayloadError:
            tally["cut (an error at the client)"] += 1
            continue
        except aiohttp.ClientError:
            tally["failed before the first byte"] += 1
            continue
        if body.endswith(b"data: [DONE]\n\n"):
            tally["complete"] += 1
        else:
            tally["cut but finished cleanly"] += 1


async def measure(streams: int, seconds: float, kill_at: float, affinity: str) -> dict[str, Any]:
    replicas: list[Replica] = await started("a", "b", "c", chunks=40, pause=0.05)
    settings = Settings(
        upstreams=[UpstreamSettings(name="m", urls=[r.url for r in replicas], affinity=affinity)],
        log_level="info",
    )
    access = logging.getLogger(ACCESS_LOGGER)
    handler = _Attempts()
    access.addHandler(handler)
    access.setLevel(logging.INFO)
    access.propagate = False
    runner = web.AppRunner(create_app(settings), **server_options(settings))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    tally: Counter[str] = Counter()
    killed_open = 0
    try:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:
            until = monotonic() + seconds
            clients = [
                asyncio.create_task(_client(session, url, until, tally)) for _ in range(streams)
            ]
            await asyncio.sleep(kill_at)
            killed_open = replicas[1].open
            await replicas[1].kill()
            await asyncio.gather(*clients)
            async with session.get(f"http://127.0.0.1:{port}/-/metrics") as resp:
                metrics = await resp.text()
    finally:
        await runner.cleanup()
        for replica in replicas:
            await replica.kill()
        access.removeHandler(handler)
    retried_metric = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("toolcall_proxy_retries_total{")
    )
    return {
        "streams in flight": streams,
        "started": sum(tally.values()),
        **dict(sorted(tally.items())),
        "in flight on the killed replica when it died": killed_open,
        "requests by attempts (access lines)": dict(sorted(handler.attempts.items())),
        "toolcall_proxy_retries_total": retried_metric,
        "served by a, b, c": [r.requests for r in replicas],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--kill-at", type=float, default=3.0)
    parser.add_argument("--affinity", choices=("auto", "none"), default="none")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    figures = asyncio.run(measure(args.streams, args.seconds, args.kill_at, args.affinity))
    for key, figure in figures.items():
        print(f"{key}: {figure}")


if __name__ == "__main__":
    main()
