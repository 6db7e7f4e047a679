"""The client protocols beside Chat Completions, by the settings key that picks their mode.

An explicit registry: a protocol package builds its ``PROTOCOL`` (proxy/core/protocols/base.py)
and is named here, nowhere else.
"""

from __future__ import annotations

from proxy.core.protocols import messages, responses
from proxy.core.protocols.base import ClientProtocol

CLIENT_PROTOCOLS: dict[str, ClientProtocol] = {
    "responses": responses.PROTOCOL,
    "messages": messages.PROTOCOL,
}
