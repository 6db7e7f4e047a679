"""Command line: ``toolcall-proxy [--config PATH] [--host HOST] [--port PORT]`` serves.

``main(argv)`` returns the exit status instead of exiting, so tests call it directly.
Configuration errors print one line naming the key and exit with status 2.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from aiohttp import web

from proxy import __version__
from proxy.app import create_app
from proxy.errors import ConfigError
from proxy.settings import DEFAULT_CONFIG_PATH, DEFAULT_PORT, Settings, load_settings

PROG = "toolcall-proxy"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Repairs streamed tool calls from OpenAI-compatible servers.",
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
    return parser


def resolve_config_path(given: Path | None) -> Path | None:
    if given is not None:
        return given
    return DEFAULT_CONFIG_PATH if DEFAULT_CONFIG_PATH.is_file() else None


def settings_from_args(args: argparse.Namespace) -> Settings:
    return load_settings(
        resolve_config_path(args.config), host=args.host, port=args.port, log_level=args.log_level
    )


def event_loop() -> asyncio.AbstractEventLoop:
    """uvloop where it is installed (it is a dependency except on Windows): on the streaming
    path it costs less CPU per chunk than asyncio's own loop (bench/RESULTS.md)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def serve(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    web.run_app(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        handler_cancellation=True,
        loop=event_loop(),
        print=lambda line: logging.getLogger("toolcall_proxy").info("%s", line.strip()),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = settings_from_args(args)
    except ConfigError as exc:
        print(f"{PROG}: config error: {exc.message}", file=sys.stderr)
        return 2
    serve(settings)
    return 0
