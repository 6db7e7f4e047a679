"""Replica health in the shell: what a change in a replica's health is logged and counted as,
and the optional active check (``upstreams[].health_path``, every ``health_interval``).

The health itself is the core's table (proxy/core/replicas.py); this module only feeds it a
probe's answer with the clock's value and says what changed. The prober reads the app's
current upstreams on each round, so a configuration reload needs nothing of it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Final

from aiohttp import ClientError, ClientTimeout, hdrs, web

from proxy.core.replicas import Change, Health
from proxy.shell.app_state import STATE, UpstreamConfig
from proxy.shell.metrics import METRICS, Metrics

log = logging.getLogger("toolcall_proxy")

#: how often the prober looks for replicas due a check
TICK_SECONDS: Final = 0.25
#: a check slower than this (or than health_interval, if shorter) failed
PROBE_TIMEOUT_SECONDS: Final = 2.0


def told(
    upstream: UpstreamConfig, change: Change, why: str, metrics: Metrics | None = None
) -> None:
    """Log a replica that left or came back into the rotation (and count an ejection). With
    a single url there is no rotation to leave (its one replica serves regardless), and
    its failures are logged as they always were: at debug here."""
    name, url = upstream.route.name, change.replica.url
    level = logging.WARNING if len(upstream.replicas.replicas) > 1 else logging.DEBUG
    if change.ejected_for is not None:
        if metrics is not None:
            metrics.replica_ejected(name, url)
        log.log(
            level,
            "upstream %s: replica %s ejected for %g s (%s; %d failure(s) in a row)",
            name,
            url,
            change.ejected_for,
            why,
            change.replica.failures,
        )
    elif change.after is Health.UP and change.before is not Health.UP:
        log.log(min(level, logging.INFO), "upstream %s: replica %s is back (%s)", name, url, why)


async def probe_replicas(app: web.Application) -> None:
    """Check every replica of the upstreams that have a ``health_path``, each when due."""
    loop = asyncio.get_running_loop()
    due: dict[tuple[str, str], float] = {}
    running: set[asyncio.Task[None]] = set()
    try:
        while True:
            state = app[STATE].now  # the running configuration's, reloads included
            now = loop.time()
            for upstream in state.upstreams.values():
                interval = upstream.options.health_interval
                if upstream.options.health_path is None:
                    continue
                for index, replica in enumerate(upstream.replicas.replicas):
                    key = (upstream.route.name, replica.url)
                    if now < due.get(key, now):
                        continue
                    due[key] = now + interval
                    task = loop.create_task(_probe(app, upstream, index))
                    running.add(task)
                    task.add_done_callback(running.discard)
            await asyncio.sleep(TICK_SECONDS)
    finally:
        for task in list(running):
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)


async def _probe(app: web.Application, upstream: UpstreamConfig, index: int) -> None:
    options, pool = upstream.options, upstream.replicas
    assert options.health_path is not None
    url = pool.replicas[index].url
    headers = {}
    if upstream.authorization is not None:
        headers[hdrs.AUTHORIZATION] = upstream.authorization
    timeout = min(PROBE_TIMEOUT_SECONDS, options.health_interval)
    try:
        async with app[STATE].now.session.get(
            url + options.health_path,
            headers=headers,
            allow_redirects=False,
            timeout=ClientTimeout(total=timeout),
        ) as resp:
            ok, why = 200 <= resp.status < 300, f"{options.health_path} answered {resp.status}"
    except TimeoutError:
        ok, why = False, f"{options.health_path} timed out after {timeout:g} s"
    except ClientError as exc:
        ok, why = False, f"{options.health_path} unreachable: {type(exc).__name__}"
    now = asyncio.get_running_loop().time()
    told(upstream, pool.probed(index, now, ok=ok), why, app[METRICS])
