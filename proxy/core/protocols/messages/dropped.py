"""The names of what a translated Messages request dropped, from a closed vocabulary.

They label a metric (``toolcall_proxy_translate_dropped_total{protocol,field}``), so a client
cannot grow its series: a name outside the vocabulary counts as ``other``, ``tools.other`` or
``content.other``.
"""

from __future__ import annotations

import re
from typing import Final

#: top-level request fields a chat upstream cannot take, and marks inside the request
FIELDS: Final = frozenset(
    {
        "metadata",
        "context_management",
        "output_config",
        "cache_control",
        "thinking",
        "service_tier",
        "container",
        "mcp_servers",
        "inference_geo",
        "speed",
        "betas",
    }
)
#: server tools (their type without its date: web_search_20250305 -> web_search)
TOOLS: Final = frozenset(
    {
        "web_search",
        "web_fetch",
        "code_execution",
        "bash",
        "text_editor",
        "computer",
        "memory",
        "tool_search_tool_regex",
        "tool_search_tool_bm25",
        "mcp_toolset",
    }
)
#: content blocks a chat message cannot carry
BLOCKS: Final = frozenset(
    {
        "thinking",
        "redacted_thinking",
        "document",
        "search_result",
        "container_upload",
        "image",
        "server_tool_use",
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "mcp_tool_use",
        "mcp_tool_result",
        "tool_reference",
    }
)
_DATE: Final = re.compile(r"_\d{8}$")


class Dropped:
    """The names of dropped fields, each once, in the order first met."""

    def __init__(self) -> None:
        self._names: dict[str, None] = {}

    def field(self, name: str) -> None:
        self._names[name if name in FIELDS else "other"] = None

    def tool(self, kind: object) -> None:
        base = _DATE.sub("", kind) if isinstance(kind, str) else ""
        self._names[f"tools.{base if base in TOOLS else 'other'}"] = None

    def block(self, kind: object) -> None:
        known = isinstance(kind, str) and kind in BLOCKS
        self._names[f"content.{kind if known else 'other'}"] = None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)
