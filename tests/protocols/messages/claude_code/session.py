"""One Claude Code session, run as ``python -m tests.protocols.messages.claude_code.session
SHAPE VIA``: the broken chat upstream, the real proxy in front of it (VIA = proxy) or not
(VIA = direct), and ``claude -p`` pointed at it, offline (research/protocols.md section 5).
Meant to run inside a network namespace that has only loopback; prints one JSON object."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.protocols.messages.claude_code.upstream import ChatUpstream

ROOT = Path(__file__).resolve().parents[4]
CLAUDE = ROOT / "tests" / "clients" / "node_modules" / ".bin" / "claude"
PROMPT = "Run the proof command with your Bash tool, then say what it printed."
TIMEOUT = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_proxy(work: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str, Path]:
    config = work / "proxy.toml"
    config.write_text(f'[[upstreams]]\nname = "model"\nurl = "{upstream}"\n')
    port = _free_port()
    log = work / "proxy.log"
    command = [sys.executable, "-m", "proxy", "--config", str(config), "--host", "127.0.0.1"]
    with log.open("wb") as out:
        process = subprocess.Popen(
            [*command, "--port", str(port)], cwd=ROOT, stdout=out, stderr=out
        )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and process.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            time.sleep(0.05)
    return process, f"http://127.0.0.1:{port}", log


def claude_env(base_url: str, home: Path) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CLAUDE_CONFIG_DIR": str(home / ".claude"),
        "LANG": "C.UTF-8",
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "sk-ant-dummy",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
    }


def run(shape: str, via: str) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="claude-code-") as tmp, ChatUpstream(shape) as up:
        work = Path(tmp)
        proxy, base, log = (None, up.url, None)
        if via == "proxy":
            proxy, base, log = start_proxy(work, up.url)
        home, repo = work / "home", work / "repo"
        home.mkdir()
        repo.mkdir()
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        argv = [str(CLAUDE), "-p", PROMPT, "--output-format", "json", "--allowedTools", "Bash"]
        try:
            done = subprocess.run(
                argv,
                cwd=repo,
                env=claude_env(base, home),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=TIMEOUT,
                check=False,
            )
            rc, out, err = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, out, err = -1, str(exc.stdout or ""), f"timed out after {TIMEOUT}s"
        finally:
            if proxy is not None:
                proxy.terminate()
                proxy.wait(timeout=10)
        return {
            "returncode": rc,
            "stdout": out[-6000:],
            "stderr": err[-3000:],
            "requests": up.requests,
            "other_paths": up.paths,
            "tool_results": up.tool_results(),
            "proxy_log": log.read_text(errors="replace")[-6000:] if log is not None else "",
        }


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2])))
