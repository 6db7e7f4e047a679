"""Whether a request asked for at most one tool call (issue 25 item 2).

Chat Completions and Responses say it with ``parallel_tool_calls: false``, Messages with
``tool_choice.disable_parallel_tool_use: true`` (which its translation sends on as
``parallel_tool_calls: false``). Some upstreams ignore it (llama-server b11434 on its Qwen2.5
path; its ``/v1/messages`` drops ``disable_parallel_tool_use``): under
``enforce_parallel_tool_calls`` the client then gets the first call and the rest are dropped,
each counted as ``parallel-call-dropped``.
"""

from __future__ import annotations

from typing import Literal

Protocol = Literal["chat", "responses", "messages"]


def one_call_asked(protocol: Protocol, body: object) -> bool:
    """From the client's own parsed request, whatever its shape; never raises."""
    if not isinstance(body, dict):
        return False
    if protocol == "messages":
        choice = body.get("tool_choice")
        return (
            isinstance(choice, dict)
            and choice.get("disable_parallel_tool_use") is True
            and choice.get("type") != "none"
        )
    return body.get("parallel_tool_calls") is False
