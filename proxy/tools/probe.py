"""``toolcall-proxy probe``: ask each upstream for a streamed tool call and list its quirks.

For each configured upstream (or the one named), the probe picks a model from the upstream's
own ``GET /v1/models`` unless one is given, sends a small streaming chat request that offers
one tool, reads the whole stream, runs it through the normalizer with that upstream's options
and prints, as a table, the repairs the normalizer had to apply: the quirks the stream showed.
It talks to the upstreams directly, not through a running proxy. Exit status 0 when every
probed upstream streamed an answer, 1 when one did not, 2 for a bad config or name.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson
from aiohttp import ClientError, ClientSession, ClientTimeout, hdrs

from proxy.core.routing import upstream_url
from proxy.settings import Settings, load_settings, resolve_config_path
from proxy.shell.app import build_upstreams, upstream_options
from proxy.shell.app_state import UpstreamConfig
from proxy.tools.replay import replay, tool_calls_in
from proxy.tools.table import format_table

HELP = "send a tool-calling request to each upstream and list the quirks its stream showed"
PROG = "toolcall-proxy probe"
DEFAULT_TIMEOUT: Final = 120.0

PROBE_TOOL: Final = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}


def probe_request(model: str) -> dict[str, Any]:
    return {
        "model": model,
        "stream": True,
        "temperature": 0,
        "max_tokens": 256,
        "messages": [
            {"role": "user", "content": "What is the weather in Paris? Use the get_weather tool."}
        ],
        "tools": [PROBE_TOOL],
    }


@dataclass(frozen=True, slots=True)
class ProbeResult:
    upstream: str
    model: str | None
    error: str | None = None  # why the upstream gave no stream to look at
    tool_calls: int = 0
    repairs: Counter[str] = field(default_factory=Counter)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config", type=Path, help="TOML config file (default: config/proxy.toml if it exists)"
    )
    parser.add_argument("--upstream", help="probe only this upstream (default: all)")
    parser.add_argument("--model", help="the model to ask (default: the upstream's first model)")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        help=f"seconds for each upstream's whole answer (default {DEFAULT_TIMEOUT:g})",
    )


def run(args: argparse.Namespace) -> int:
    settings = load_settings(resolve_config_path(args.config))
    upstreams = build_upstreams(settings)
    if args.upstream is not None and args.upstream not in upstreams:
        known = ", ".join(upstreams)
        print(f"{PROG}: no upstream named {args.upstream!r} (known: {known})", file=sys.stderr)
        return 2
    names = [args.upstream] if args.upstream is not None else list(upstreams)
    chosen = [upstreams[name] for name in names]
    limit = ClientTimeout(total=args.timeout, sock_connect=settings.timeouts.connect)
    results = asyncio.run(probe_all(settings, chosen, model=args.model, limit=limit))
    print(results_table(results))
    return 1 if any(r.error is not None for r in results) else 0


async def probe_all(
    settings: Settings, upstreams: list[UpstreamConfig], *, model: str | None, limit: ClientTimeout
) -> list[ProbeResult]:
    async with ClientSession(timeout=limit, trust_env=False) as session:
        return list(
            await asyncio.gather(*(probe(session, settings, u, model=model) for u in upstreams))
        )


async def probe(
    session: ClientSession, settings: Settings, upstream: UpstreamConfig, *, model: str | None
) -> ProbeResult:
    name = upstream.route.name
    headers: dict[str, str] = {}
    if upstream.authorization is not None:
        headers[hdrs.AUTHORIZATION] = upstream.authorization
    try:
        if model is None:
            model = await first_model(session, upstream, headers)
            if model is None:
                return ProbeResult(name, None, "GET /v1/models listed no model")
        request = probe_request(model)
        url = upstream_url(upstream.route.base_url, "/v1/chat/completions")
        async with session.post(url, json=request, headers=headers) as resp:
            body = await resp.read()
            content_type = resp.headers.get(hdrs.CONTENT_TYPE, "")
            if resp.status != 200 or not content_type.startswith("text/event-stream"):
                return ProbeResult(name, model, f"status {resp.status}: {_excerpt(body)}")
    except TimeoutError:
        return ProbeResult(name, model, "timed out")
    except _NoModels as exc:
        return ProbeResult(name, model, str(exc))
    except ClientError as exc:
        return ProbeResult(name, model, f"unreachable: {type(exc).__name__}")
    # The upstream's own options, even when it is configured as passthrough: the probe is
    # what tells whether it needs repairing.
    options = upstream_options(upstream.options, settings)
    replayed = replay(body, options, request)
    return ProbeResult(name, model, None, tool_calls_in(replayed.output), replayed.repairs)


class _NoModels(Exception):
    """GET /v1/models did not answer with a model list."""


async def first_model(
    session: ClientSession, upstream: UpstreamConfig, headers: dict[str, str]
) -> str | None:
    url = upstream_url(upstream.route.base_url, "/v1/models")
    async with session.get(url, headers=headers) as resp:
        body = await resp.read()
        if resp.status != 200:
            raise _NoModels(f"GET /v1/models: status {resp.status}")
    try:
        data = orjson.loads(body).get("data")
    except (orjson.JSONDecodeError, AttributeError) as exc:
        raise _NoModels("GET /v1/models: not a model list") from exc
    for entry in data if isinstance(data, list) else ():
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            return str(entry["id"])
    return None


def _excerpt(body: bytes, limit: int = 120) -> str:
    text = body.decode("utf-8", "replace").strip().replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def results_table(results: list[ProbeResult]) -> str:
    rows = []
    for r in results:
        if r.error is not None:
            rows.append([r.upstream, r.model or "-", "error", "-", r.error])
            continue
        quirks = ", ".join(f"{kind} ({n})" for kind, n in sorted(r.repairs.items()))
        rows.append([r.upstream, r.model or "-", "ok", str(r.tool_calls), quirks or "none"])
    return format_table(["UPSTREAM", "MODEL", "RESULT", "TOOL CALLS", "QUIRKS (repairs)"], rows)
