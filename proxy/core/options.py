"""What the core is told about one upstream (``UpstreamOptions``) and about one request
(``RequestInfo``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal

from proxy.core.arguments.parallel import one_call_asked
from proxy.core.request_repairs.needs import TemplateNeeds
from proxy.core.sse import DEFAULT_MAX_EVENT_BYTES

DEFAULT_MAX_HELD_BYTES: Final = 1 << 20
DEFAULT_MAX_RESPONSE_BODY_BYTES: Final = 64 << 20


@dataclass(frozen=True, slots=True)
class UpstreamOptions:
    """Every per-upstream setting the core reads, in one frozen value.

    The shell builds it once per upstream from the settings (proxy/shell/app.py,
    ``upstream_options``) and hands it, by keyword, to whatever serves that upstream's
    answers: the chat normalizer, the translating bridge and both native repairers. A new
    per-upstream setting that the core needs is a field here, not another argument.
    """

    coalesce: bool = False  #: output form S2 (each call whole in one delta) instead of S1
    dialects: tuple[str, ...] = ()  #: markup dialects (proxy.core.markup) for text; () = off
    #: also look for markup in reasoning text: with every dialect (True), none (False), or
    #: those whose models write calls in their reasoning ("auto": proxy.core.markup.reasoning_names)
    extract_from_reasoning: bool | Literal["auto"] = "auto"
    #: drop a call equal to the one right before it (same name, JSON-equal arguments)
    dedupe_calls: bool = False
    #: the field a chat client gets reasoning in: "keep" (as sent), "reasoning_content" or
    #: "reasoning" (chat/reasoning.py)
    reasoning_field: Literal["keep", "reasoning_content", "reasoning"] = "keep"
    #: a leading ``<think>...</think>`` in content is reasoning (chat/reasoning.py)
    think_in_content: bool = False
    #: one SSE event larger than this is not parsed: the stream is forwarded raw from there
    max_event_bytes: int = DEFAULT_MAX_EVENT_BYTES
    #: cap on what one stream may hold: argument text kept for checking, held calls and text
    #: a dialect holds (counted in characters, a lower bound of their UTF-8 size)
    max_held_bytes: int = DEFAULT_MAX_HELD_BYTES
    #: a whole (non-streamed) body larger than this is not rewritten
    max_response_body_bytes: int = DEFAULT_MAX_RESPONSE_BODY_BYTES
    #: chat clients' requests reshaped for the chat template (request_repairs = "auto"); the
    #: translated ones always are
    request_repairs: bool = True
    #: what the upstream's template needs, as its ``template`` setting names the family;
    #: None ("auto"): read from the upstream's own template (shell/template_probe.py)
    template: TemplateNeeds | None = None
    #: arguments that are not JSON healed into JSON that fits the tool (proxy/core/arguments);
    #: a call's arguments are then sent whole at its end
    heal_arguments: bool = False
    #: arguments that do not fit coerced where the schema says so plainly ("5" for 5)
    coerce_arguments: bool = False
    #: parallel_tool_calls: false (disable_parallel_tool_use) held to: calls past the first
    #: dropped (parallel-call-dropped)
    enforce_parallel_tool_calls: bool = True
    #: llama-server's parser failure that holds the model's whole calls answered with them
    #: (proxy/core/parse_failure.py)
    recover_parse_failures: bool = True


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """The parts of the client's request that decide how a response may be repaired."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    tool_choice: object = None
    #: ``parallel_tool_calls: false``: at most one call (a translated Messages request says
    #: so for ``disable_parallel_tool_use``)
    one_call: bool = False

    @classmethod
    def from_body(cls, body: object) -> RequestInfo:
        """From the parsed JSON request, whatever its shape; never raises."""
        if not isinstance(body, dict):
            return cls()
        tools = body.get("tools")
        return cls(
            tools=[t for t in tools if isinstance(t, dict)] if isinstance(tools, list) else [],
            tool_choice=body.get("tool_choice"),
            one_call=one_call_asked("chat", body),
        )

    @property
    def allows_extraction(self) -> bool:
        """Markup in text may become tool calls only when the client offered tools (Q32)."""
        return bool(self.tools) and self.tool_choice != "none"

    @property
    def fallback_name(self) -> str | None:
        """The name any call must have: the function ``tool_choice`` names, or the only tool.

        Used only when an upstream never sent a call's name, so the call can still run.
        """
        choice = self.tool_choice
        if isinstance(choice, dict):
            name = _function_name(choice)
            if name is not None:
                return name
        # TGI takes a function's name as a string tool_choice (issue 24 item 2)
        if isinstance(choice, str) and any(_function_name(t) == choice for t in self.tools):
            return choice
        if len(self.tools) == 1:
            return _function_name(self.tools[0])
        return None


def _function_name(obj: dict[str, Any]) -> str | None:
    function = obj.get("function")
    if isinstance(function, dict):
        name = function.get("name")
        if isinstance(name, str) and name:
            return name
    return None
