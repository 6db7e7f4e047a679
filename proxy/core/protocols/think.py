"""A leading ``<think>...</think>`` block (issue 24 item 11, ``think_in_content``): in a stream
as its text comes (:class:`LeadingThink`: the chat normalizer, the native Messages stream),
and in a whole text (:func:`leading_think`: a chat completion's message, a native Message's
first text block, a native Response's first message), split the same way: the first block
only, after leading whitespace, and a block that never closes is reasoning to the end.
"""

from __future__ import annotations

from typing import Final

from proxy.core.markup.scan import MarkerScanner

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


def leading_think(text: str) -> tuple[str, str] | None:
    """(reasoning, the rest) of ``text``; None when it does not begin with the block."""
    think = LeadingThink()
    reasoning, rest = think.feed(text)
    more, tail = think.close()
    return (reasoning + more, rest + tail) if think.found else None
