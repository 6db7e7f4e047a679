"""The client protocols, by name: Chat Completions, and those a chat upstream serves by
translation (whose name is also the per-upstream settings key that picks their mode).

An explicit registry: a protocol package builds its ``PROTOCOL`` (proxy/core/protocols/base.py)
and is named here, nowhere else; proxy/settings.py derives the mode settings from it.
"""

from __future__ import annotations

from typing import Final

from proxy.core.protocols import chat, messages, responses
from proxy.core.protocols.base import ClientProtocol

CLIENT_PROTOCOLS: dict[str, ClientProtocol] = {
    "chat": chat.PROTOCOL,
    "responses": responses.PROTOCOL,
    "messages": messages.PROTOCOL,
}

#: the protocol every translated request is sent in
CHAT: Final = chat.PROTOCOL


def translated_protocols() -> tuple[ClientProtocol, ...]:
    """The protocols with a translate mode, whose mode an upstream's settings pick."""
    return tuple(p for p in CLIENT_PROTOCOLS.values() if p.translates)
