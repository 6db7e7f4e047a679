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
from proxy.core.markup.scan import MarkerScanner

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


OPEN: Final = "<think>"
CLOSE: Final = "</think>"
_CLOSE_SCANNER: Final = MarkerScanner((CLOSE,))


class LeadingThink:
    """A leading ``<think>...</think>`` in a choice's content, as reasoning (servers without a
    reasoning parser: Ollama's older models, llama-server with ``--reasoning-format none``),
    under the upstream's ``think_in_content``. Only the text that may still be the start of
    ``<think>`` or ``</think>`` is held; ``done`` once the content is known to start
    otherwise, or the block ended."""

    __slots__ = ("_buf", "done", "found", "thinking")

    def __init__(self) -> None:
        self._buf = ""
        self.thinking = False
        self.found = False  #: a leading block was seen
        self.done = False

    @property
    def held(self) -> int:
        return len(self._buf)

    def feed(self, text: str) -> tuple[str, str]:
        """The reasoning and the content in ``text`` (and what was held before it)."""
        if self.done:
            return "", text
        buf = self._buf + text
        self._buf = ""
        if not self.thinking:
            start = buf.lstrip()
            if OPEN.startswith(start):  # nothing but whitespace and the start of <think>
                self._buf = buf
                return "", ""
            if not start.startswith(OPEN):
                self.done = True
                return "", buf
            self.thinking = self.found = True
            buf = start[len(OPEN) :]
        end, found = _CLOSE_SCANNER.scan(buf)
        if found is None:
            self._buf = buf[end:]
            return buf[:end], ""
        self.done = True
        self.thinking = False
        return buf[: found.start], buf[found.end :]

    def close(self) -> tuple[str, str]:
        """What is held, at the content's end: reasoning inside the block, else content."""
        held, self._buf = self._buf, ""
        self.done = True
        return (held, "") if self.thinking else ("", held)
