"""A whole text's leading ``<think>...</think>`` block (issue 24 item 11, ``think_in_content``),
for the answers that are not streamed: a chat completion's message, a native Message's first
text block, a native Response's first message. A stream splits its text as it comes
(chat/reasoning.py ``LeadingThink``) the same way: the first block only, after leading
whitespace, and a block that never closes is reasoning to the end.
"""

from __future__ import annotations

from typing import Final

OPEN: Final = "<think>"
CLOSE: Final = "</think>"


def leading_think(text: str) -> tuple[str, str] | None:
    """(reasoning, the rest) of ``text``; None when it does not begin with the block."""
    start = text.lstrip()
    if not start.startswith(OPEN):
        return None
    body = start[len(OPEN) :]
    end = body.find(CLOSE)
    if end < 0:
        return body, ""
    return body[:end], body[end + len(CLOSE) :]
