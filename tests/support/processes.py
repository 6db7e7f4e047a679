"""The real CLI (``python -m proxy``) as a child process: the workers' start-up lines, a port that
refuses connections. The stream it holds open across a signal is tests/support/upstreams.py's
``HeldStream``."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import orjson

# the repository root, where the CLI runs as its users run it
ROOT = Path(__file__).parents[2]


async def connection_refused(port: int) -> bool:
    try:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
    except (ConnectionRefusedError, ConnectionResetError):
        # A SYN that races the listening socket's close is answered with a reset instead of
        # a refusal; either way the connect failed and nothing accepted it.
        return True
    writer.close()
    return False


RUNNING = re.compile(r"Running on http://127\.0\.0\.1:(\d+) ")


STARTED = re.compile(r"worker (\d+) started \(pid (\d+)\)")


SERVING = r"\[worker \d+\] serving"


class Workers:
    """``python -m proxy --workers N --port 0``; its stderr in a file, read as it grows."""

    def __init__(self, process: asyncio.subprocess.Process, log: Path) -> None:
        self.process = process
        self.log = log
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_for(self, pattern: str, count: int = 1) -> list[Any]:
        async with asyncio.timeout(30):
            while len(found := re.findall(pattern, self.text())) < count:
                assert self.process.returncode is None, self.text()
                await asyncio.sleep(0.05)
        return found

    def pids(self) -> dict[int, int]:
        """The latest pid of each worker, from the supervisor's log."""
        return {int(n): int(pid) for n, pid in STARTED.findall(self.text())}

    def access(self) -> list[dict[str, Any]]:
        lines = [line for line in self.text().splitlines() if line.startswith("{")]
        return [entry for entry in map(orjson.loads, lines) if "request_id" in entry]

    async def exit_status(self) -> int:
        async with asyncio.timeout(40):
            return await self.process.wait()
