"""A chat message's ``content`` as templates take it: one string where it is text only."""

from __future__ import annotations

from typing import Any, Final

#: between the texts of two messages merged into one, and between text parts made one string
TEXT_JOIN: Final = "\n\n"


def is_text_part(part: object) -> bool:
    return (
        isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str)
    )


def text_only(content: object) -> str | None:
    """The text of a string, or of a part list holding only text parts; None otherwise."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(is_text_part(part) for part in content):
        return TEXT_JOIN.join(part["text"] for part in content if part["text"])
    return None


def as_parts(content: object) -> list[Any]:
    """The content as a part list (a string is one text part; none is no part)."""
    if isinstance(content, list):
        return list(content)
    if isinstance(content, str) and content:
        return [{"type": "text", "text": content}]
    return []


def joined(first: object, second: object) -> object:
    """Two contents as one: strings joined by a blank line, else the part lists in order (no
    content counts as empty text)."""
    texts = [text_only("" if c is None else c) for c in (first, second)]
    if texts[0] is not None and texts[1] is not None:
        return TEXT_JOIN.join(text for text in texts if text)
    return as_parts(first) + as_parts(second)
