"""``toolcall-proxy demo``: the proxy at work with no model server.

It starts a stand-in upstream replaying real recorded broken streams (proxy/demo/, with their
provenance) and the proxy in front of it, both on free loopback ports, asks each stream once
directly and once through the proxy, and prints the tool calls a client reconstructs from
each. The client is openai-python's stream accumulator, as a rule: tool-call entries are
merged at the list position their ``index`` names, and every string field (id, name,
arguments) is concatenated; an entry without an index is lost (openai-python raises on it).

A call counts as recovered when it has one id, its name is one of the tools the request
offered and its arguments are one JSON object. The exit status is 0 only when every call
through the proxy was recovered.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, Final

import orjson
from aiohttp import ClientSession, web

from proxy.core.sse import Event, SSEDecoder, is_done
from proxy.settings import Settings, UpstreamSettings
from proxy.shell.app import create_app
from proxy.tools.replay_upstream import replay_app

HELP: Final = "show the repairs on real recorded broken streams, with no model server"
RECORDINGS: Final = Path(str(files("proxy") / "demo"))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


@dataclass(slots=True)
class Reconstructed:
    """One call as the client assembled it."""

    id: str = ""
    name: str = ""
    arguments: str = ""
    ids: int = 0  #: how many ids were concatenated into ``id``

    def recovered(self, tools: list[str]) -> bool:
        if self.ids != 1:
            return False
        try:
            value = orjson.loads(self.arguments)
        except orjson.JSONDecodeError:
            return False
        return self.name in tools and isinstance(value, dict)


@dataclass(slots=True)
class Outcome:
    calls: list[Reconstructed] = field(default_factory=list)
    lost: int = 0  #: entries the client could not place (no index)

    def recovered(self, tools: list[str]) -> bool:
        return not self.lost and bool(self.calls) and all(c.recovered(tools) for c in self.calls)


def accumulate(body: bytes) -> Outcome:
    """The tool calls of choice 0, by openai-python's accumulation rule."""
    outcome = Outcome()
    decoder = SSEDecoder(max_event_bytes=1 << 20)
    for item in [*decoder.feed(body), *decoder.close()]:
        if not isinstance(item, Event) or item.data is None or is_done(item.data):
            continue
        chunk = orjson.loads(item.data)
        for choice in chunk.get("choices") or ():
            for entry in (choice.get("delta") or {}).get("tool_calls") or ():
                _merge(outcome, entry)
    return outcome


def _merge(outcome: Outcome, entry: dict[str, Any]) -> None:
    index = entry.get("index")
    if not isinstance(index, int):
        outcome.lost += 1
        return
    while len(outcome.calls) <= index:
        outcome.calls.append(Reconstructed())
    call = outcome.calls[index]
    fn = entry.get("function") or {}
    for source in (entry, fn):  # old llama.cpp puts the id inside function
        if isinstance(source.get("id"), str):
            call.id += source["id"]
            call.ids += 1
    if isinstance(fn.get("name"), str):
        call.name += fn["name"]
    arguments = fn.get("arguments")
    if isinstance(arguments, str):
        call.arguments += arguments
    elif arguments is not None:  # an object: openai-python keeps it as it is, not as text
        call.arguments += str(arguments)


def request_body(stream: str, tools: list[str]) -> bytes:
    return orjson.dumps(
        {
            "model": stream,
            "stream": True,
            "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
            "tools": [
                {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
                for name in tools
            ],
        }
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


async def _serve(app: web.Application, port: int) -> web.AppRunner:
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def run_demo() -> list[dict[str, Any]]:
    streams: list[dict[str, Any]] = orjson.loads((RECORDINGS / "streams.json").read_bytes())
    upstream_port, proxy_port = free_port(), free_port()
    upstream = await _serve(replay_app(RECORDINGS), upstream_port)
    settings = Settings(
        upstreams=[UpstreamSettings(name="demo", url=f"http://127.0.0.1:{upstream_port}")]
    )
    proxy = await _serve(create_app(settings), proxy_port)
    results = []
    try:
        async with ClientSession() as session:
            for stream in streams:
                name, tools = stream["file"].removesuffix(".sse"), stream["tools"]
                body = request_body(name, tools)
                seen = {}
                for via, port in (("direct", upstream_port), ("proxy", proxy_port)):
                    url = f"http://127.0.0.1:{port}/v1/chat/completions"
                    async with session.post(url, data=body) as resp:
                        seen[via] = accumulate(await resp.read())
                results.append(
                    {
                        "stream": name,
                        "title": stream["title"],
                        "direct": asdict(seen["direct"]),
                        "proxy": asdict(seen["proxy"]),
                        "direct_recovered": seen["direct"].recovered(tools),
                        "recovered": seen["proxy"].recovered(tools),
                    }
                )
    finally:
        await proxy.cleanup()
        await upstream.cleanup()
    return results


def _show(outcome: dict[str, Any]) -> list[str]:
    lines = [
        f"    {c['name'] or '(no name)'}({c['arguments'] or ''})  id={c['id'] or '(none)'}"
        for c in outcome["calls"]
    ]
    if outcome["lost"]:
        lines.append(f"    {outcome['lost']} tool-call entries lost (no index)")
    return lines or ["    (no tool calls)"]


def run(args: argparse.Namespace) -> int:
    results = asyncio.run(run_demo())
    if args.json:
        print(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())
    else:
        for result in results:
            print(f"{result['stream']}: {result['title']}")
            print("  without the proxy:" + ("" if result["direct_recovered"] else " broken"))
            print("\n".join(_show(result["direct"])))
            print(
                "  through the proxy:" + (" recovered" if result["recovered"] else " NOT recovered")
            )
            print("\n".join(_show(result["proxy"])))
            print()
        recovered = sum(r["recovered"] for r in results)
        print(f"{recovered} of {len(results)} streams recovered through the proxy")
    return 0 if all(r["recovered"] for r in results) else 1
