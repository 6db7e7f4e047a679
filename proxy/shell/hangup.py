"""SIGHUP: ignored, with one log line, until the proxy can reload its configuration (issue 24).

By default a hangup ends a process at once: a single proxy cut every stream without an access
line, and a supervisor left its workers' runtime folder behind. A terminal that closes, or an
operator who expects ``kill -HUP`` to reload, must not do that. With workers, the supervisor
says it once; the workers ignore the signal silently (a hangup of the terminal reaches the
whole process group).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Final

from aiohttp import web

log = logging.getLogger("toolcall_proxy")

IGNORED: Final = (
    "SIGHUP ignored: the configuration is read at start only (no reload yet);"
    " restart the proxy to apply a change"
)


def say_ignored() -> None:
    log.warning(IGNORED)


async def ignore_on_startup(app: web.Application) -> None:
    """``on_startup`` hook of the single process: its loop answers SIGHUP with the line."""
    if hasattr(signal, "SIGHUP"):  # not on Windows
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, say_ignored)
