"""One worker process of several (``workers`` > 1): the proxy's app on the shared socket.

The supervisor (:mod:`proxy.shell.supervisor`) forks it with the listening socket already
bound. It serves that socket with its own event loop, and its own registry on a private unix
socket for its siblings' ``/-/metrics`` (:mod:`proxy.shell.fleet_metrics`). It drains exactly
as the single process does under ``web.run_app``: on SIGTERM or SIGINT it stops accepting,
closes idle connections, lets open responses run up to ``timeouts.shutdown_grace``, cancels
the rest, and exits 0. It also drains when the supervisor is gone (its lifeline pipe reads
end of file), so a supervisor killed outright leaves no worker serving on its own.

A second signal while draining changes nothing: on Ctrl-C the terminal sends SIGINT to every
process of the group and the supervisor sends SIGTERM as well.

Once it serves, it writes its pid to the ``ready`` pipe (a reload retires the old workers only
when the new ones serve); once drained, it writes its final counts for the merge
(:mod:`proxy.shell.fleet_metrics`) before its metrics socket goes, so that a worker retired by
a reload leaves the proxy's totals as they were.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
from collections.abc import Callable

from aiohttp import web

from proxy.settings import Settings
from proxy.shell.accesslog import configure_logging, flush_access_log
from proxy.shell.app import create_app
from proxy.shell.fleet_metrics import Fleet, private_metrics_app
from proxy.shell.heap import freeze_startup_heap
from proxy.shell.limits import LISTEN_BACKLOG, server_options
from proxy.shell.metrics import METRICS

log = logging.getLogger("toolcall_proxy.worker")


def run_worker(
    settings: Settings,
    sock: socket.socket,
    fleet: Fleet,
    lifeline: int,
    new_loop: Callable[[], asyncio.AbstractEventLoop],
    ready: int | None = None,
) -> int:
    """Serve until told to stop (on a loop from ``new_loop``); the exit status."""
    configure_logging(settings.log_level, worker=fleet.worker)
    loop = new_loop()
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_serve(settings, sock, fleet, lifeline, ready))
    finally:
        _cancel_leftovers(loop)
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return 0


async def _serve(
    settings: Settings, sock: socket.socket, fleet: Fleet, lifeline: int, ready: int | None
) -> None:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    loop.add_reader(lifeline, stop.set)
    app = create_app(settings, fleet)
    runner = web.AppRunner(
        app,
        handler_cancellation=True,
        access_log=None,  # proxy.shell.accesslog writes one JSON line per request instead
        shutdown_timeout=settings.timeouts.shutdown_grace,
        **server_options(settings),
    )
    private = web.AppRunner(private_metrics_app(app[METRICS].registry), access_log=None)
    await runner.setup()
    await private.setup()
    freeze_startup_heap()  # before serving: see heap.py
    try:
        path = fleet.socket_path()
        path.unlink(missing_ok=True)  # left by this worker's predecessor, if it was killed
        await web.UnixSite(private, str(path)).start()
        await web.SockSite(runner, sock, backlog=LISTEN_BACKLOG).start()
        log.info("serving (pid %d)", os.getpid())
        if ready is not None:
            os.write(ready, f"{os.getpid()}\n".encode())
        await stop.wait()
    finally:
        loop.remove_reader(lifeline)
        await runner.cleanup()
        flush_access_log()  # the drained requests' lines, before the process goes
        try:
            fleet.write_final(app[METRICS].registry)
        except OSError as exc:  # the runtime directory went with the supervisor
            log.warning("metrics: could not leave the final counts: %s", exc)
        await private.cleanup()


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
