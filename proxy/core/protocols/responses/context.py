"""What the Responses encoder needs from the client's request: the model name to echo, how to map
a chat function's name back to the client's tool, and the request fields a Response object echoes.

request.py builds it from the client's body; encode.py reads it. It is the ``context`` of
proxy.core.protocols.registry's ``ChatRequest``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

#: namespace functions reach a chat upstream as one flat name: ``<namespace>__<function>``
NAMESPACE_SEPARATOR = "__"


class ToolKind(StrEnum):
    FUNCTION = "function"
    CUSTOM = "custom"  # a freeform tool: one string parameter ``input`` upstream


@dataclass(frozen=True, slots=True)
class ToolRef:
    """The client's tool behind one chat function name."""

    kind: ToolKind
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class ResponsesContext:
    #: the client's ``model``, echoed in every Response object (None: the upstream's)
    model: str | None = None
    #: chat function name -> the client's tool, for names that differ or custom tools
    tools: Mapping[str, ToolRef] = field(default_factory=dict)
    #: request fields a Response object carries back (instructions, tools, tool_choice, ...)
    echo: Mapping[str, Any] = field(default_factory=dict)

    def tool(self, chat_name: str) -> ToolRef:
        return self.tools.get(chat_name) or ToolRef(ToolKind.FUNCTION, chat_name)
