"""How each agent under test is run offline against a base URL: its command line, its
environment and the files it needs first (a fresh home, a config that turns off every
network feature, found by running each agent against a fake server on loopback)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

NODE_BIN: Final = Path(__file__).resolve().parents[1] / "clients" / "node_modules" / ".bin"
PROMPT: Final = "Run the proof command with your shell tool, then say what it printed."


@dataclass(frozen=True, slots=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]


def _base_env(home: Path) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "LANG": "C.UTF-8",
    }
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    return env


def opencode(base_url: str, home: Path) -> Invocation:
    """OpenCode speaks Chat Completions through its openai-compatible provider."""
    env = _base_env(home)
    config = {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            "p": {
                "npm": "@ai-sdk/openai-compatible",
                "options": {"baseURL": f"{base_url}/v1", "apiKey": "dummy"},
                "models": {"m": {"tool_call": True, "limit": {"context": 128000, "output": 4096}}},
            }
        },
        "model": "p/m",
        "small_model": "p/m",
        "permission": {"bash": "allow"},
        "autoupdate": False,
        "share": "disabled",
        "lsp": False,
    }
    path = home / "opencode.json"
    path.write_text(json.dumps(config))
    # OpenCode installs its plugin package in the background unless its config folder already
    # lists it and has node_modules (no setting turns that off).
    folder = Path(env["XDG_CONFIG_HOME"]) / "opencode"
    (folder / "node_modules" / "@opencode-ai" / "plugin").mkdir(parents=True, exist_ok=True)
    deps = {"dependencies": {"@opencode-ai/plugin": "*"}}
    (folder / "package.json").write_text(json.dumps(deps))
    (folder / "package-lock.json").write_text(
        json.dumps({"name": "opencode", "lockfileVersion": 3, "packages": {"": deps}})
    )
    env["OPENCODE_CONFIG"] = str(path)
    for flag in (
        "AUTOUPDATE",
        "MODELS_FETCH",
        "LSP_DOWNLOAD",
        "DEFAULT_PLUGINS",
        "SHARE",
        "CLAUDE_CODE",
        "EXTERNAL_SKILLS",
    ):
        env[f"OPENCODE_DISABLE_{flag}"] = "1"
    return Invocation([str(NODE_BIN / "opencode"), "run", "--format", "json", PROMPT], env)


def claude_code(base_url: str, home: Path) -> Invocation:
    """Claude Code speaks the Messages API (``ANTHROPIC_BASE_URL``); ``--allowedTools Bash``
    lets it run the call without ``--dangerously-skip-permissions``, which root may not use."""
    env = _base_env(home)
    env["CLAUDE_CONFIG_DIR"] = str(home / ".claude")
    env["ANTHROPIC_BASE_URL"] = base_url
    env["ANTHROPIC_API_KEY"] = "sk-ant-dummy"
    for flag in (
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        "DISABLE_AUTOUPDATER",
        "DISABLE_TELEMETRY",
        "DISABLE_ERROR_REPORTING",
    ):
        env[flag] = "1"
    argv = [str(NODE_BIN / "claude"), "-p", PROMPT, "--output-format", "json"]
    return Invocation([*argv, "--allowedTools", "Bash"], env)


CODEX_FEATURES_OFF: Final = (
    "plugins",
    "remote_plugin",
    "plugin_sharing",
    "apps",
    "in_app_updates",
    "in_app_browser",
    "browser_use",
    "computer_use",
    "skill_mcp_dependency_install",
    "daemon_auto_start",
)


def codex_config(base_url: str) -> str:
    """A custom provider on the Responses wire API (the proxy), and no updates, analytics,
    plugins or anything else that would leave 127.0.0.1."""
    features = "\n".join(f"{name} = false" for name in CODEX_FEATURES_OFF)
    return f"""model = "m"
model_provider = "p"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.p]
name = "proxy"
base_url = "{base_url}/v1"
env_key = "TOOLCALL_PROXY_TEST_KEY"
wire_api = "responses"
request_max_retries = 0
stream_max_retries = 0

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"

[features]
{features}
"""


def codex(base_url: str, home: Path) -> Invocation:
    """Codex CLI speaks the Responses API (``wire_api = "responses"``); ``exec --json`` prints
    its events, one JSON object a line."""
    env = _base_env(home)
    env["CODEX_HOME"] = str(home / ".codex")
    env["TOOLCALL_PROXY_TEST_KEY"] = "sk-test"
    env["NO_COLOR"] = "1"
    Path(env["CODEX_HOME"]).mkdir(parents=True, exist_ok=True)
    (Path(env["CODEX_HOME"]) / "config.toml").write_text(codex_config(base_url))
    argv = [str(NODE_BIN / "codex"), "exec", "--json", "--skip-git-repo-check"]
    return Invocation([*argv, "--dangerously-bypass-approvals-and-sandbox", PROMPT], env)


AGENTS: Final[dict[str, Callable[[str, Path], Invocation]]] = {
    "opencode": opencode,
    "claude-code": claude_code,
    "codex": codex,
}
