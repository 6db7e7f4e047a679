"""The things measured side by side: each starts on a free 127.0.0.1 port in front of the
fake upstream and names the process tree whose CPU and memory count against it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import orjson

from bench.load import API_KEY
from bench.protocols import client_protocol

ROOT: Final = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with {proc.returncode} before listening; see {log}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"not listening on {port} after {timeout} s; see {log}")


class Server:
    """A child process listening on a port, its output in a log file of the work dir."""

    def __init__(
        self, name: str, argv: list[str], port: int, workdir: Path, timeout: float, cwd: Path = ROOT
    ):
        self.port = port
        self.log = workdir / f"{name}.log"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd
            )
        try:
            wait_port(port, self.proc, timeout, self.log)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_upstream(workdir: Path) -> Server:
    port = free_port()
    return Server(
        "upstream", [sys.executable, "-m", "bench.upstream", "--port", str(port)], port, workdir, 30
    )


class Target:
    """Base: a proxy started as a child process in front of the upstream."""

    name = ""
    startup_timeout = 30.0
    cwd = ROOT

    def __init__(self) -> None:
        self.server: Server | None = None
        self.base = ""  # URL the load generator talks to, once started

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        raise NotImplementedError

    def start(self, upstream: str, workdir: Path) -> None:
        port = free_port()
        argv = self.argv(upstream, port, workdir)
        self.server = Server(self.name, argv, port, workdir, self.startup_timeout, self.cwd)
        self.base = self.server.url

    def stop(self) -> None:
        if self.server:
            self.server.stop()
            self.server = None

    @property
    def pid(self) -> int | None:
        return self.server.proc.pid if self.server else None

    def version(self) -> str:
        return ""

    def speaks(self, stream: str) -> str | None:
        """The protocol the load generator speaks to this target when ``stream`` (a value of
        bench/protocols.py's dimension) is measured, or None when it has no such stream. By
        default chat and the native streams, passed through: only a bridge translates."""
        return None if stream.endswith("/translate") else client_protocol(stream)


class Direct(Target):
    """No proxy: the client talks to the upstream (the baseline for added latency). The
    upstream has no Responses or Messages over its chat stream, so for a translated stream
    direct's row is the chat stream's: the latency a bridge adds is against it."""

    name = "direct"

    def start(self, upstream: str, workdir: Path) -> None:
        self.base = upstream

    def speaks(self, stream: str) -> str | None:
        return "chat" if stream.endswith("/translate") else client_protocol(stream)


class Bare(Target):
    """bench/bare.py: the floor for an aiohttp proxy (on uvloop unless ``loop`` says asyncio)."""

    def __init__(self, loop: str = "uvloop") -> None:
        super().__init__()
        self.loop = loop
        self.name = "bare aiohttp" + ("" if loop == "uvloop" else f" ({loop})")

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        argv = [sys.executable, "-m", "bench.bare", "--upstream", upstream, "--port", str(port)]
        return [*argv, "--loop", self.loop]


class Proxy(Target):
    """This project's proxy, run the way a user runs it; from another checkout (``root``, e.g.
    a git worktree of an older commit) to compare before and after a change in one run.
    ``responses`` and ``messages`` translate (it serves chat too), or with ``native`` are the
    upstream's own streams repaired (it serves only those)."""

    def __init__(self, root: Path | None = None, workers: int = 1, native: bool = False) -> None:
        super().__init__()
        self.name = "toolcall-proxy" + (f"@{root.name}" if root else "")
        self.name += f" ({workers} workers)" if workers > 1 else ""
        self.name += " native" if native else ""
        self.root = root
        self.cwd = root or ROOT
        self.workers = workers  # its CPU is the whole process tree's: supervisor and workers
        self.native = native

    def native_twin(self) -> Proxy:
        """The same proxy in native mode, for the native streams."""
        return Proxy(self.root, self.workers, native=True)

    def speaks(self, stream: str) -> str | None:
        native = stream.endswith("/native")
        return client_protocol(stream) if native == self.native else None

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        config = workdir / f"{self.name}.toml"
        text = f'[[upstreams]]\nname = "bench"\nurl = "{upstream}"\nmodels = ["*"]\n'
        # Unset, both translate: the same file as before the protocols, for proxy@DIR of then.
        text += 'responses = "native"\nmessages = "native"\n' if self.native else ""
        config.write_text(text)
        argv = [sys.executable, "-m", "proxy", "--config", str(config), "--port", str(port)]
        return argv + (["--workers", str(self.workers)] if self.workers > 1 else [])

    def version(self) -> str:
        git = ["git", "-C", str(self.cwd)]
        head = subprocess.run(
            [*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        )
        dirty = subprocess.run(
            [*git, "status", "--porcelain", "proxy"], capture_output=True, text=True
        )
        return head.stdout.strip() + (" (modified)" if dirty.stdout.strip() else "")


NGINX_CONF: Final = """\
daemon off;
master_process on;
worker_processes 1;
worker_rlimit_nofile 65536;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 16384; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    upstream fake {{ server {upstream}; keepalive 1024; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://fake;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 3600s;
        }}
    }}
}}
"""


def nginx_binary(install: bool) -> str | None:
    """Debian's nginx; installed with apt-get when missing and ``install`` is set."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None
    )
    if found or not install or not shutil.which("apt-get"):
        return found
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "update", "-q"], ["apt-get", "install", "-y", "-q", "nginx"]):
        subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return shutil.which("nginx") or "/usr/sbin/nginx"


class Nginx(Target):
    """nginx as a plain streaming reverse proxy (proxy_buffering off): the reference."""

    name = "nginx"

    def __init__(self, binary: str) -> None:
        super().__init__()
        self.binary = binary

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        conf = workdir / "nginx.conf"
        host = upstream.removeprefix("http://")
        conf.write_text(NGINX_CONF.format(dir=workdir, upstream=host, port=port))
        return [
            self.binary,
            "-c",
            str(conf),
            "-p",
            str(workdir),
            "-e",
            str(workdir / "nginx-error.log"),
        ]

    def version(self) -> str:
        out = subprocess.run([self.binary, "-v"], capture_output=True, text=True)
        return out.stderr.strip().removeprefix("nginx version: ")


class LiteLLM(Target):
    """LiteLLM proxy as the peer, routing every model name to the upstream; also the peer of
    the proxy's bridges: its Responses and Messages endpoints over the chat upstream.

    Over ``openai/*`` LiteLLM would send both to the upstream's ``/v1/responses``, and for a
    model it has no card for it asks without ``stream`` and fakes the stream from the whole
    answer; ``use_chat_completions_api`` and ``use_chat_completions_url_for_anthropic_messages``
    make both bridges stream from ``/v1/chat/completions`` instead. So it has no native
    streams here."""

    name = "litellm"
    startup_timeout = 120.0

    def __init__(self, command: list[str]) -> None:
        super().__init__()
        self.command = command

    def speaks(self, stream: str) -> str | None:
        return None if stream.endswith("/native") else client_protocol(stream)

    def argv(self, upstream: str, port: int, workdir: Path) -> list[str]:
        config = workdir / "litellm.yaml"  # JSON is YAML
        route: dict[str, object] = {"model": "openai/*", "api_base": upstream + "/v1"}
        route |= {"api_key": "bench", "use_chat_completions_api": True}
        config.write_bytes(
            orjson.dumps(
                {
                    "model_list": [{"model_name": "*", "litellm_params": route}],
                    "litellm_settings": {"use_chat_completions_url_for_anthropic_messages": True},
                    # LiteLLM refuses to start without one; the load generator sends it.
                    "general_settings": {"master_key": API_KEY},
                }
            )
        )
        return [*self.command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]

    def version(self) -> str:
        # The interpreter that runs the command: this one, or the script's shebang.
        python = self.command[0]
        if python != sys.executable:
            first = Path(python).read_bytes().split(b"\n", 1)[0]
            python = first[2:].decode().strip() if first.startswith(b"#!") else sys.executable
        code = "import importlib.metadata as m; print(m.version('litellm'))"
        out = subprocess.run([python, "-c", code], capture_output=True, text=True)
        return out.stdout.strip()


def litellm_command(explicit: str | None) -> list[str] | None:
    """The LiteLLM proxy command if one is installed: given, on PATH, or importable here."""
    if explicit:
        return [explicit]
    if found := shutil.which("litellm"):
        return [found]
    if importlib.util.find_spec("litellm") is not None:
        return [sys.executable, "-m", "litellm"]
    return None
