"""The parts of a client's Responses request that decide how a native stream may be repaired."""

from __future__ import annotations

from dataclasses import dataclass, field

from proxy.core.arguments.parallel import one_call_asked
from proxy.core.errors import ClientRequestError
from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.responses.tools import convert_tools


@dataclass(frozen=True, slots=True)
class NativeRequest:
    model: str | None = None
    #: the function tools in chat's shape, for the markup dialects that type parameter values
    chat_tools: list[JSONObject] = field(default_factory=list)
    tool_choice: object = None
    one_call: bool = False  #: ``parallel_tool_calls: false`` (issue 25 item 2)

    @classmethod
    def from_body(cls, body: object) -> NativeRequest:
        """From the parsed request, whatever its shape; never raises."""
        if not isinstance(body, dict):
            return cls()
        try:
            tools = convert_tools(body.get("tools")).tools
        except ClientRequestError:  # a malformed request is the upstream's to reject
            tools = []
        model = body.get("model")
        return cls(
            model if isinstance(model, str) else None,
            tools,
            body.get("tool_choice"),
            one_call_asked("responses", body),
        )

    @property
    def extracts(self) -> bool:
        """Markup in text may become calls only when the client offered tools."""
        return bool(self.chat_tools) and self.tool_choice != "none"

    @property
    def fallback_name(self) -> str | None:
        """The name a call must have when the upstream never named it: the function
        ``tool_choice`` names, or the only tool."""
        choice = self.tool_choice
        if isinstance(choice, dict) and isinstance(choice.get("name"), str) and choice["name"]:
            return str(choice["name"])
        if len(self.chat_tools) == 1:
            return str(self.chat_tools[0]["function"]["name"])
        return None
