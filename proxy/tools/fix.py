"""``toolcall-proxy fix FILE|-``: what the proxy would do to a captured response, without servers.

The normalized response goes to stdout, a summary of the repairs to stderr, so
``toolcall-proxy fix capture.sse > fixed.sse`` keeps the two apart. The capture is a response
body as the upstream sent it: an event stream or a whole JSON completion.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

import orjson

from proxy.core.markup import check_names
from proxy.core.options import UpstreamOptions
from proxy.settings import LimitSettings
from proxy.tools.replay import replay
from proxy.tools.table import format_table

HELP = "normalize a captured response: the result to stdout, the repairs to stderr"
PROG = "toolcall-proxy fix"


class InputError(Exception):
    """A file that cannot be read or parsed; reported on one line, exit status 2."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "capture", help="a captured response body (event stream or JSON); - reads stdin"
    )
    parser.add_argument(
        "--request",
        type=Path,
        help="the request that produced it (its JSON body, or a capture's .meta.json holding it"
        ' under "request"); its tools allow recovering calls written as text',
    )
    parser.add_argument("--output", choices=["streamed", "coalesced"], default="streamed")
    parser.add_argument(
        "--dialects", default="auto", help='"auto" (default), "none" or a comma-separated list'
    )
    parser.add_argument(
        "--extract-from-reasoning",
        action=argparse.BooleanOptionalAction,
        default="auto",
        help="also look in reasoning text with every dialect (--no-...: not at all; neither:"
        " the dialects whose models write calls there)",
    )


def run(args: argparse.Namespace) -> int:
    limits = LimitSettings()
    try:
        capture = _read(args.capture)
        request = read_request(args.request) if args.request is not None else None
    except InputError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 2
    options = UpstreamOptions(
        coalesce=args.output == "coalesced",
        dialects=dialect_names(args.dialects),
        extract_from_reasoning=args.extract_from_reasoning,
        max_event_bytes=limits.max_event_bytes,
        max_held_bytes=limits.max_held_bytes,
        max_response_body_bytes=limits.max_response_body_bytes,
    )
    result = replay(capture, options, request)
    sys.stdout.buffer.write(result.output)
    sys.stdout.buffer.flush()
    print(summary(result.repairs, unchanged=result.output == capture), file=sys.stderr)
    return 0


def dialect_names(value: str) -> tuple[str, ...]:
    if value == "none":
        return ()
    return check_names([name.strip() for name in value.split(",") if name.strip()])


def _read(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {name}: {exc.strerror or exc}") from exc


def read_request(path: Path) -> object:
    try:
        body = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except orjson.JSONDecodeError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from exc
    if isinstance(body, dict) and "messages" not in body and isinstance(body.get("request"), dict):
        return body["request"]  # a capture's .meta.json
    return body


def summary(repairs: Counter[str], *, unchanged: bool) -> str:
    if not repairs:
        return f"{PROG}: no repairs" + (": the output is the input, byte for byte" * unchanged)
    total = sum(repairs.values())
    rows = [[kind, str(count)] for kind, count in sorted(repairs.items())]
    table = format_table(["REPAIR", "COUNT"], rows)
    return f"{PROG}: {total} repairs of {len(repairs)} kinds\n{table}"
