"""The field chat clients get reasoning in (issue 24 item 11, ``reasoning_field``).

Servers disagree: ``reasoning_content`` (llama.cpp, DeepSeek, older vLLM), ``reasoning``
(current vLLM, Groq, OpenRouter), or both with the same text; clients read one of them (the AI
SDK and OpenCode read ``reasoning_content``). With ``reasoning_field`` set, a delta's other
field is renamed to it, in its place, and dropped when it repeats the named field's text.
Under ``think_in_content``, a leading ``<think>...</think>`` in the content is reasoning
(:class:`LeadingThink`).
"""

from __future__ import annotations

from typing import Final

from proxy.core.jsonvalues import JSONObject
from proxy.core.protocols.think import LeadingThink

FIELDS: Final = ("reasoning_content", "reasoning")


def other_field(setting: str) -> str | None:
    """The field a delta must not carry under ``setting``; None for "keep"."""
    if setting not in FIELDS:
        return None
    return FIELDS[1] if setting == FIELDS[0] else FIELDS[0]


def renamed(delta: JSONObject, field: str, other: str) -> JSONObject | None:
    """``delta`` with its reasoning under ``field`` only; None when it needs no change (or
    carries both fields with different texts, which is no known server's and stays)."""
    if other not in delta:
        return None
    if field in delta:
        if delta[field] != delta[other]:
            return None
        return {k: v for k, v in delta.items() if k != other}
    return {field if k == other else k: v for k, v in delta.items()}


# the leading <think> block's splitter, shared with the native repairers (protocols/think.py)
__all__ = ["FIELDS", "LeadingThink", "other_field", "renamed"]
