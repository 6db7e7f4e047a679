"""The names of what a translated Responses request dropped, from a closed vocabulary.

They label a metric (``toolcall_proxy_translate_dropped_total{protocol,field}``), so a client
cannot grow its series: a name outside the vocabulary counts as ``<group>.other``.
"""

from __future__ import annotations

from typing import Final

#: top-level request fields with no chat meaning (or none a stateless proxy can give them)
FIELDS: Final = frozenset(
    {
        "include",
        "store",
        "prompt_cache_key",
        "prompt_cache_retention",
        "client_metadata",
        "service_tier",
        "truncation",
        "background",
        "metadata",
        "safety_identifier",
        "max_tool_calls",
        "prompt",
        "top_logprobs",
        "stream_options",
        "tool_choice",
        "tool_choice.allowed_tools",
        "reasoning.summary",
        "reasoning.generate_summary",
        "text.verbosity",
    }
)
#: the kinds named after a group's dot: hosted tools, input items and parts a chat upstream
#: cannot take
KINDS: Final = {
    "tools": frozenset(
        {
            "web_search",
            "web_search_preview",
            "file_search",
            "image_generation",
            "code_interpreter",
            "computer_use",
            "computer_use_preview",
            "local_shell",
            "shell",
            "mcp",
            "apply_patch",
            "tool_search",
        }
    ),
    "input": frozenset(
        {
            "reasoning",
            "item_reference",
            "compaction",
            "local_shell_call",
            "local_shell_call_output",
            "shell_call",
            "shell_call_output",
            "apply_patch_call",
            "apply_patch_call_output",
            "web_search_call",
            "file_search_call",
            "image_generation_call",
            "code_interpreter_call",
            "computer_call",
            "computer_call_output",
            "mcp_call",
            "mcp_list_tools",
            "mcp_approval_request",
            "mcp_approval_response",
        }
    ),
    "input.content": frozenset({"input_file", "input_audio", "input_image"}),
    "tools.namespace": frozenset({"custom", "web_search"}),
    "tool_choice": frozenset({"web_search", "file_search", "image_generation", "mcp"}),
    "text.format": frozenset({"grammar"}),
}


def bounded(name: str) -> str:
    if name in FIELDS:
        return name
    group, _, kind = name.rpartition(".")
    if group in KINDS:
        return name if kind in KINDS[group] else f"{group}.other"
    return "other"
