"""The real proxy, started as users start it (`python -m proxy --config ...`), on 127.0.0.1."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0

# Model names "<route>/<case>" pick the upstream, and with it the output form under test.
ROUTES = {"S1": "streamed", "S2": "coalesced"}


def proxy_config(upstream_url: str) -> str:
    tables = [
        f'[[upstreams]]\nname = "{route}"\nurl = "{upstream_url}"\n'
        f'models = ["{route}/*"]\noutput = "{route}"\ndialects = "auto"\n'
        for route in ROUTES.values()
    ]
    return "\n".join(tables)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ProxyProcess:
    def __init__(self, workdir: Path, upstream_url: str, config: str | None = None) -> None:
        self.config = workdir / "proxy.toml"
        self.config.write_text(proxy_config(upstream_url) if config is None else config)
        self.log = workdir / "proxy.log"
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "proxy", "--config", str(self.config)]
        command += ["--host", "127.0.0.1", "--port", str(self.port)]
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=log)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"the proxy exited with {self._process.returncode} at start:\n{self.logged()}"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the proxy did not listen within {START_TIMEOUT}s:\n{self.logged()}")

    def logged(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
