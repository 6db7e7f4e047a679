"""A real llama-server (the build of .ci/llama-server) on 127.0.0.1, one chat template at a
time, with the tiny model of tiny_model.py."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.live.tiny_model import CONTEXT

ROOT: Final = Path(__file__).resolve().parents[2]
BUILD_SCRIPT: Final = ROOT / ".ci" / "llama-server"
START_TIMEOUT: Final = 60.0


@dataclass(frozen=True, slots=True)
class Build:
    """The cached build: bin/llama-server, templates/ (llama.cpp's models/templates/), vocab/."""

    root: Path

    @property
    def binary(self) -> Path:
        return self.root / "bin" / "llama-server"

    @property
    def vocab(self) -> Path:
        return self.root / "vocab" / "ggml-vocab-gpt-2.gguf"

    def templates(self) -> list[Path]:
        return sorted((self.root / "templates").glob("*.jinja"))


def build() -> Build:
    """The build .ci/llama-server made (it only prints the folder when it is cached; .ci/check
    runs it before the tests, so a test run never waits for the compiler unless nobody did)."""
    given = os.environ.get("TOOLCALL_PROXY_LLAMA_SERVER")
    if given:
        return Build(Path(given))
    done = subprocess.run(
        ["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, check=True, timeout=3600
    )
    return Build(Path(done.stdout.strip().splitlines()[-1]))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    def __init__(self, build: Build, model: Path, template: Path, log: Path, *, seed: int = 1):
        self.template = template
        self.log = log
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._argv = [
            str(build.binary),
            *("-m", str(model), "--host", "127.0.0.1", "--port", str(self.port)),
            *("--jinja", "--chat-template-file", str(template)),
            *("-c", str(CONTEXT), "-np", "1", "-t", "2", "--seed", str(seed)),
            *("--offline", "--no-webui"),
        ]
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> LlamaServer:
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(self._argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"llama-server exited at start:\n{self.logged()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        self.__exit__()
        raise RuntimeError(f"llama-server did not get ready in {START_TIMEOUT}s:\n{self.logged()}")

    def __exit__(self, *exc: object) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None

    def logged(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]
