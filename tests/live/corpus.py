"""The recorded client requests (tests/live/corpus/, made by record_corpus.py) and how a chat
upstream's answer to one is judged."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Final

CORPUS: Final = Path(__file__).resolve().parent / "corpus"
#: shapes with an image: a text-only server refuses them before any template (no projector),
#: so they are judged by the jinja2 render test only
IMAGES: Final = frozenset({"sdk-chat-image", "sdk-messages-image"})


@dataclass(frozen=True, slots=True)
class Recorded:
    name: str
    path: str  #: the client's path: /v1/chat/completions, /v1/responses, /v1/messages
    body: dict[str, Any]

    @property
    def protocol(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def load(*, images: bool = True) -> list[Recorded]:
    out = []
    for path in sorted(CORPUS.glob("*.json")):
        data = json.loads(path.read_text())
        if images or path.stem not in IMAGES:
            out.append(Recorded(path.stem, data["path"], data["body"]))
    return out


class Verdict(Enum):
    ACCEPTED = "accepted"  #: the template rendered it
    #: rendered, then the tiny model's output failed the server's output parser (a 500 that
    #: says so): the request was accepted, the model is what failed
    PARSER = "model output failed the parser"
    REFUSED = "refused"  #: the template (or the server's checks before it) refused the request


_PARSER_FAILURE: Final = re.compile(r"does not match the expected .* format")
# an error inside a 200 stream, in each protocol's shape (chat's and llama.cpp's data line,
# Responses' failed response, Messages' error event)
_STREAM_ERROR: Final = re.compile(r'data: \{"error"|"type":\s*"response\.failed"|event: error')


def verdict(status: int, body: bytes) -> tuple[Verdict, str]:
    text = body.decode(errors="replace")
    if status == 200 and not _STREAM_ERROR.search(text):
        return Verdict.ACCEPTED, ""
    found = _STREAM_ERROR.search(text)
    detail = text[found.start() : found.start() + 300] if found else text[:300]
    if _PARSER_FAILURE.search(text):
        return Verdict.PARSER, detail
    return Verdict.REFUSED, detail
