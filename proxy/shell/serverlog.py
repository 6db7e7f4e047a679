"""The HTTP server's own log: one line for each request its parser refuses.

aiohttp answers a request it cannot parse (both ``Content-Length`` and ``Transfer-Encoding``,
an over-long line, a bare LF, ...) with 400 itself, before any middleware runs, and logs the
parser's exception with its traceback: ten lines that any client can make the proxy write as
fast as it can send bad requests. The refusal is the client's fault and the traceback says
nothing about the proxy, so the server logs through :data:`SERVER_LOG` instead, whose filter
turns such a record into one line naming the client, the status and the parser's reason.
Everything else (a real bug, a 500) keeps its traceback.
"""

from __future__ import annotations

import logging
from typing import Final

from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOG: Final = logging.getLogger("toolcall_proxy.http")
MAX_REASON: Final = 200  # the parser's message quotes the client's bytes; keep the line short


def refusal_in_one_line(record: logging.LogRecord) -> bool:
    """Rewrite a parser refusal in place: no traceback, the reason on the same line."""
    exc = record.exc_info[1] if record.exc_info else None
    if not isinstance(exc, HttpProcessingError):
        return True
    # aiohttp logs "Error handling request from %s" with the client's address.
    client = record.args[0] if isinstance(record.args, tuple) and record.args else "?"
    record.msg = "refused a malformed request from %s: %s %s"
    record.args = (client, exc.code, _one_line(exc.message))
    record.exc_info = None
    record.exc_text = None
    if record.levelno > logging.WARNING:  # the client's fault, not the proxy's
        record.levelno, record.levelname = logging.WARNING, "WARNING"
    return True


def _one_line(message: str) -> str:
    # The parser's message spans lines: the reason, the offending bytes, a caret under them.
    parts = [part.strip() for part in message.splitlines()]
    text = " ".join(part for part in parts if part and part.strip("^ "))
    return text if len(text) <= MAX_REASON else text[: MAX_REASON - 3] + "..."


SERVER_LOG.addFilter(refusal_in_one_line)
