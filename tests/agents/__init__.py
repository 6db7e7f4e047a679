"""Real coding agents (OpenCode, Codex CLI, Claude Code) run offline through the proxy."""
