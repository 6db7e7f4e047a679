"""Command line: ``toolcall-proxy [--config PATH] [--host HOST] [--port PORT] [--workers N]``
serves.

``toolcall-proxy COMMAND ...`` runs one of the operator tools listed in ``COMMANDS`` instead
(``check``, ``fix``, ``probe``, ``demo``; each has ``--help``).

``main(argv)`` returns the exit status instead of exiting, so tests call it directly.
Configuration errors print one line naming the key and exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, NamedTuple

from aiohttp import web

from proxy import __version__
from proxy.core.errors import ConfigError
from proxy.settings import (
    DEFAULT_CONFIG_PATH,
    DEFAULT_PORT,
    Settings,
    load_settings,
    resolve_config_path,
)
from proxy.shell import hangup
from proxy.shell.accesslog import configure_logging, flush_access_log
from proxy.shell.app import create_app
from proxy.shell.heap import freeze_on_startup
from proxy.shell.limits import LISTEN_BACKLOG, server_options
from proxy.shell.supervisor import listening_socket, supervise
from proxy.tools import check, demo, fix, probe

PROG = "toolcall-proxy"


class Command(NamedTuple):
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: Final = {
    "check": Command(check.HELP, check.add_arguments, check.run),
    "fix": Command(fix.HELP, fix.add_arguments, fix.run),
    "probe": Command(probe.HELP, probe.add_arguments, probe.run),
    "demo": Command(demo.HELP, demo.add_arguments, demo.run),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Repairs streamed tool calls from OpenAI-compatible servers.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"operator tools ({PROG} COMMAND --help):\n"
        + "\n".join(f"  {name:<7} {c.help}" for name, c in COMMANDS.items()),
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument(
        "--config",
        type=Path,
        help=f"TOML config file (default: {DEFAULT_CONFIG_PATH} if it exists, else built-in)",
    )
    parser.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, help=f"port to listen on (default {DEFAULT_PORT})")
    parser.add_argument("--log-level", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--workers", type=int, help="processes serving the one port (default 1; `workers`)"
    )
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """The settings as the flags, the environment and the file give them now (at start, and
    again on SIGHUP: proxy.shell.hangup)."""
    return load_settings(
        resolve_config_path(args.config),
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        workers=args.workers,
    )


def event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (it is a dependency except on Windows): on the streaming
    path it costs less CPU per chunk than asyncio's own loop (bench/RESULTS.md)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serving_app(settings: Settings, reload: hangup.Loader | None = None) -> web.Application:
    """The app a single process serves: its start-up heap frozen once started (heap.py), its
    configuration loaded again by ``reload`` on SIGHUP (hangup.py; default: as it is)."""
    app = create_app(settings)
    app.on_startup.append(freeze_on_startup)
    hangup.Reloader(reload if reload is not None else lambda: settings).install(app)
    return app


def serve(settings: Settings, reload: hangup.Loader | None = None) -> int:
    """Serve ``settings``; ``reload`` loads them again on SIGHUP (default: as they are)."""
    configure_logging(settings.log_level)
    loader = reload if reload is not None else lambda: settings
    if settings.workers > 1:
        return supervise(settings, event_loop, loader)
    web.run_app(
        serving_app(settings, loader),
        # bound here, as the supervisor binds it: a port in use is one line and status 2
        sock=listening_socket(settings.host, settings.port),
        handler_cancellation=True,
        loop=event_loop(),
        access_log=None,  # proxy.shell.accesslog writes one JSON line per request instead
        # On SIGTERM/SIGINT: stop listening, close idle connections, let open responses run
        # this long, then cancel them (their clients see a truncated stream), and exit 0.
        shutdown_timeout=settings.timeouts.shutdown_grace,
        backlog=LISTEN_BACKLOG,
        **server_options(settings),
        print=lambda line: logging.getLogger("toolcall_proxy").info("%s", line.strip()),
    )
    flush_access_log()  # the lines of the last requests, held up to 100 ms (accesslog.py)
    return 0


def run_command(name: str, argv: Sequence[str]) -> int:
    command = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"{PROG} {name}", description=command.help)
    command.add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return command.run(args)
    except ConfigError as exc:
        return config_error(exc)


def config_error(exc: ConfigError) -> int:
    print(f"{PROG}: config error: {exc.message}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in COMMANDS:
        return run_command(argv[0], argv[1:])
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
        return serve(settings, lambda: settings_from_args(args))
    except ConfigError as exc:
        return config_error(exc)
