"""A Messages request for a server's own ``/v1/messages`` (native mode): ``system`` entries
inside ``messages`` (Claude Code puts them there) moved into the top-level ``system``, after
its own text and in order, as the translation merges them: llama-server renders them where
they stand, and templates take a system message only first (Qwen3.5: "System message must be
at the beginning."; vLLM refuses them, vllm#44000)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from proxy.core.jsonvalues import JSONObject
from proxy.core.repairs import Repair


def _blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list) else []


def native_request(body: JSONObject) -> tuple[JSONObject, Counter[str]]:
    """The request to send and its repairs; the very body when it needs none."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not any(
        isinstance(m, dict) and m.get("role") == "system" for m in messages
    ):
        return body, Counter()
    inner = [m for m in messages if isinstance(m, dict) and m.get("role") == "system"]
    system = _blocks(body.get("system"))
    for message in inner:
        system += _blocks(message.get("content"))
    out = dict(body)
    out["system"] = system
    out["messages"] = [
        m for m in messages if not (isinstance(m, dict) and m.get("role") == "system")
    ]
    return out, Counter({Repair.SYSTEM_NOT_FIRST: 1})
